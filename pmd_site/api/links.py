"""/api/links: a note's outgoing links and its backlinks, as `pmd links` and `pmd backlinks` show them."""

from ninja import Query, Router

from indexing.links import document_links
from pmd_site.api.schemas import ErrorOut
from search import LinksOut

router = Router(tags=["links"])


@router.get(
    "/links",
    response={200: LinksOut, 401: ErrorOut, 404: ErrorOut, 422: ErrorOut},
    summary="A note's links (resolved or not) and its backlinks, by path, pmd://collection/path or #docid",
)
def links(
    request,
    ref: str = Query(..., min_length=1, max_length=4096),
    collection: list[str] = Query(default_factory=list),
    limit: int | None = Query(None, ge=1, le=10000, description="at most this many links and backlinks"),
):
    return document_links(ref, access=request.auth, collections=collection or None, limit=limit).as_dict()
