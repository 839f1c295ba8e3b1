"""/api/related: the notes related to a note, as `pmd related` shows them (search.retrieval.related)."""

from ninja import Field, Query, Router, Schema

from pmd_site.api.schemas import ErrorOut
from search.retrieval.related import related_notes

router = Router(tags=["related"])


class RelatedNoteOut(Schema):
    docid: str
    uri: str
    collection: str
    path: str
    title: str
    score: float = Field(..., description="similarity + 0.5 per link direction + 0.1 per shared tag (at most 0.3)")
    similarity: float | None = Field(None, description="cosine similarity to the note's mean vector; "
                                                       "None when not among its nearest")
    reasons: list[str] = Field(..., description='"links to it", "linked from it", "shares tags: a, b", '
                                                '"similar text (0.83)"')
    links_to_it: bool
    linked_from_it: bool
    shared_tags: list[str]


class RelatedOut(Schema):
    docid: str
    uri: str
    collection: str
    path: str
    title: str
    results: list[RelatedNoteOut]
    warnings: list[str]
    copies: int = Field(..., description="other documents with the same content (never listed as related)")


@router.get("/related", response={200: RelatedOut, 401: ErrorOut, 404: ErrorOut, 422: ErrorOut},
            summary="The notes related to a note (links either way, shared tags, similar text), with reasons")
def related(request, ref: str = Query(..., min_length=1, max_length=4096),
            collection: list[str] = Query(default_factory=list),
            limit: int = Query(10, ge=1, le=100, description="at most this many notes")):
    return related_notes(ref, access=request.auth, limit=limit, collections=collection or None).as_dict()
