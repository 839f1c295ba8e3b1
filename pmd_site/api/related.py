"""/api/related: the notes related to a note, as `pmd related` shows them (search.retrieval.related)."""

from ninja import Query, Router

from pmd_site.api.schemas import ErrorOut
from search import RelatedOut, related_notes

router = Router(tags=["related"])


@router.get(
    "/related",
    response={200: RelatedOut, 401: ErrorOut, 404: ErrorOut, 422: ErrorOut},
    summary="The notes related to a note (links either way, shared tags, similar text), with reasons",
)
def related(
    request,
    ref: str = Query(..., min_length=1, max_length=4096),
    collection: list[str] = Query(default_factory=list),
    limit: int = Query(10, ge=1, le=100, description="at most this many notes"),
):
    return related_notes(ref, access=request.auth, limit=limit, collections=collection or None).as_dict()
