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
