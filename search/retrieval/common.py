"""Small pieces every search mode shares: collection filters, snippet cuts."""

from __future__ import annotations

from collections.abc import Iterator

from indexing.access import Access, collection_suggestions
from indexing.errors import CollectionNotFound
from indexing.models import Collection

SNIPPET_CHARS = 300  # longest snippet piece cut from one long line


def collection_ids_for(names: list[str] | None, access: Access) -> list[int] | None:
    """Ids of the collections a search reads: the named ones, or every one `access` sees.

    None means no filter (the local user or a superuser searching everything); an empty list
    means nothing may be read. A name `access` does not see is unknown, like one never created.
    """
    wanted = list(dict.fromkeys(n.strip() for n in names or () if n and n.strip()))
    if not wanted:
        return access.collection_ids()
    visible = access.collection_ids()
    found = {
        name: pk
        for name, pk in Collection.objects.filter(name__in=wanted).values_list("name", "id")
        if visible is None or pk in visible
    }
    missing = [n for n in wanted if n not in found]
    if missing:
        raise CollectionNotFound(name=missing[0], suggestions=collection_suggestions(missing[0], access))
    return [found[n] for n in wanted]


def request_access(request) -> Access:
    """The request's principal; a request without one is a programming error, never "everything"."""
    if request.access is None:
        raise TypeError("SearchRequest.access is required: Access.local_user() for the local user")
    return request.access


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
