"""Housekeeping: removing what nothing refers to any more."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection, transaction

from indexing.models import Content, Document, LLMCache
from indexing.services.converting import extractions_prune


@dataclass
class CleanupReport:
    inactive_documents: int
    orphaned_content: int
    llm_cache_entries: int
    unused_extractions: int = 0

    def as_dict(self) -> dict:
        return self.__dict__.copy()


def index_cleanup(*, clear_llm_cache: bool = True, vacuum: bool = True) -> CleanupReport:
    with transaction.atomic():
        inactive, _ = Document.objects.filter(active=False).delete()
        orphans, _ = Content.objects.filter(documents__isnull=True, commits__isnull=True).delete()
        cache = LLMCache.objects.all().delete()[0] if clear_llm_cache else 0
        extractions = extractions_prune()  # after the inactive documents: what only they read goes too
    if vacuum and not connection.in_atomic_block:
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    return CleanupReport(inactive, orphans, cache, extractions)
