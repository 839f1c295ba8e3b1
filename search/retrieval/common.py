"""Small pieces every search mode shares: the user-facing error, collection filters, snippet cuts."""

from __future__ import annotations

from collections.abc import Iterator

from indexing.errors import CollectionNotFound, InvalidSearchInput
from indexing.models import Collection
from indexing.selectors import close_matches

SNIPPET_CHARS = 300  # longest snippet piece cut from one long line


class SearchError(InvalidSearchInput):
    """Bad search input the user can fix (unknown collection, ...): shown as one line."""


class SearchCollectionNotFound(CollectionNotFound, SearchError):
    """A search restricted to a collection that does not exist: collection_not_found (404 on the API)."""


def collection_ids_for(names: list[str] | None) -> list[int] | None:
    """Ids of the named collections (None = no filter); unknown names raise SearchError."""
    if not names:
        return None
    wanted = list(dict.fromkeys(n.strip() for n in names if n and n.strip()))
    if not wanted:
        return None
    found = dict(Collection.objects.filter(name__in=wanted).values_list("name", "id"))
    missing = [n for n in wanted if n not in found]
    if missing:
        known = list(Collection.objects.values_list("name", flat=True))
        raise SearchCollectionNotFound(
            name=missing[0], suggestions=[f"pmd://{n}/" for n in close_matches(missing[0], known)])
    return [found[n] for n in wanted]


def line_pieces(line: str, width: int = SNIPPET_CHARS) -> Iterator[tuple[int, int]]:
    """[start, end) pieces of a long line, each cut at a space in the second half of its window."""
    start = 0
    while start < len(line):
        end = min(len(line), start + width)
        if end < len(line):
            cut = line.rfind(" ", start + width // 2, end)
            end = cut if cut > start else end
        yield start, end
        start = end


# --- deferred snippets -----------------------------------------------------------------
# Hybrid search fetches each list deep (fusion's statistics need it) but shows a few hits:
# a retriever asked with `snippets=False` leaves each result's snippet, line and highlights
# to a batch function of its response, called (once per result) by complete_snippets for
# the results actually shown. Copies of a result (copy.copy) carry the pending work.

_PENDING = "_pending_snippet"


def defer_snippet(result, batch, data) -> None:
    """Mark `result` as waiting for `batch([(result, data), ...])` to fill its snippet."""
    setattr(result, _PENDING, (batch, data))


def complete_snippets(results) -> None:
    """Fill the deferred snippets of `results`, one batch call per retriever response."""
    groups: dict[int, tuple] = {}
    for result in results:
        pending = result.__dict__.pop(_PENDING, None)
        if pending is not None:
            groups.setdefault(id(pending[0]), (pending[0], []))[1].append((result, pending[1]))
    for batch, items in groups.values():
        batch(items)
