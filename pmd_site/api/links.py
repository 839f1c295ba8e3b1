"""/api/links: a note's outgoing links and its backlinks, as `pmd links` and `pmd backlinks` show them."""

from ninja import Field, Query, Router, Schema

from indexing.links import document_links
from pmd_site.api.schemas import ErrorOut

router = Router(tags=["links"])


class LinkOut(Schema):
    kind: str = Field(..., description="wikilink, embed or markdown")
    link: str = Field(..., description="the link as written: [[Note#Heading]], ![[Embed]], (path.md)")
    target: str = Field(..., description="what the link names")
    heading: str
    shown: str = Field(..., description="the text shown instead of the target ([[Note|shown]])")
    line: int = Field(..., description="line of the link in the note that writes it")
    context: str = Field(..., description="the sentence around the link")
    resolved: bool
    docid: str | None = Field(None, description="the note at the other end: the target of an outgoing link, "
                                                "the linking note of a backlink")
    uri: str | None = None
    title: str | None = None
    path: str | None = None


class LinksOut(Schema):
    docid: str
    uri: str
    collection: str
    path: str
    title: str
    links: list[LinkOut]
    backlinks: list[LinkOut]
    links_total: int
    backlinks_total: int


@router.get("/links", response={200: LinksOut, 401: ErrorOut, 404: ErrorOut, 422: ErrorOut},
            summary="A note's links (resolved or not) and its backlinks, by path, pmd://collection/path or #docid")
def links(request, ref: str = Query(..., min_length=1, max_length=4096),
          collection: list[str] = Query(default_factory=list),
          limit: int | None = Query(None, ge=1, le=10000, description="at most this many links and backlinks")):
    return document_links(ref, access=request.auth, collections=collection or None, limit=limit).as_dict()
