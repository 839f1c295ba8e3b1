"""What is pending: derived from the database (active documents without a marker), never from a queue."""

from __future__ import annotations

import time

from django.db.models import Exists, OuterRef

from indexing.models import Commit, ContentEmbedding, Document, EmbeddingFingerprint


def _active_documents(collections: list[str] | None):
    documents = Document.objects.filter(active=True)
    if collections:
        documents = documents.filter(collection__name__in=collections)
    return documents


def _commits(collections: list[str] | None):
    commits = Commit.objects.all()
    if collections:
        commits = commits.filter(collection__name__in=collections)
    return commits


def pending_contents(fingerprint: EmbeddingFingerprint, *, collections: list[str] | None = None, history: bool = True):
    """Hashes of the content active documents (and, with `history`, indexed commits) use that is
    not fully embedded for `fingerprint` (a queryset of strings). Asked from the documents' side
    so that counting never reads the content bodies."""
    done = ContentEmbedding.objects.filter(content=OuterRef("content"), fingerprint=fingerprint)
    documents = _active_documents(collections).filter(~Exists(done)).values_list("content_id", flat=True)
    if not history:
        return documents.distinct().order_by("content_id")
    commits = _commits(collections).filter(~Exists(done)).values_list("content_id", flat=True)
    return documents.union(commits).order_by("content_id")


_PENDING_TTL = 30.0
_pending_cache: dict[tuple, tuple[float, int]] = {}


def pending_count(fingerprint: EmbeddingFingerprint, collections: list[str] | None) -> int:
    """How many documents vector search cannot see yet. One probe per active document
    (≈2 µs each), so long-running servers reuse the answer for a few seconds; the cache
    lives here, with `forget_pending_counts`, which every embedding run calls."""
    key = (fingerprint.pk, tuple(sorted(collections or ())))
    now = time.monotonic()
    cached = _pending_cache.get(key)
    if cached and now - cached[0] < _PENDING_TTL:
        return cached[1]
    count = pending_contents(fingerprint, collections=collections, history=False).count()
    _pending_cache[key] = (now, count)
    return count


def forget_pending_counts() -> None:
    """Embedding just changed what is pending."""
    _pending_cache.clear()


def wanted_contents(*, collections: list[str] | None = None, history: bool = True):
    """Hashes of the content active documents (and indexed commits) use (a queryset of strings)."""
    documents = _active_documents(collections).values_list("content_id", flat=True)
    if not history:
        return documents.distinct().order_by("content_id")
    return documents.union(_commits(collections).values_list("content_id", flat=True)).order_by("content_id")
