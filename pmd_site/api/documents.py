"""/api/get and /api/multi-get: read documents, as `pmd get` and `pmd multi-get` do."""

from typing import Any

from ninja import Query, Router, Schema

from indexing.selectors import document_page
from indexing.selectors import documents_multi_get as multi_get
from pmd_site.api.schemas import ErrorOut
from search import MultiGetOut

router = Router(tags=["documents"])


class DocumentOut(Schema):
    docid: str
    uri: str
    collection: str
    path: str
    title: str
    from_line: int
    lines: list[str]
    total_lines: int
    context: list[str]
    frontmatter: dict[str, Any]


@router.get(
    "/get",
    response={200: DocumentOut, 401: ErrorOut, 404: ErrorOut, 416: ErrorOut, 422: ErrorOut},
    summary="One document by path, pmd://collection/path or #docid (optionally :LINE)",
)
def document_get(
    request,
    ref: str = Query(..., min_length=1, max_length=4096),
    from_line: int | None = Query(None, ge=1),
    max_lines: int | None = Query(None, ge=0),
    collection: list[str] = Query(default_factory=list),
):
    page = document_page(ref, access=request.auth, from_line=from_line, max_lines=max_lines, collections=collection)
    return {**page.as_dict(), "total_lines": page.total_lines}


@router.get(
    "/multi-get",
    response={200: MultiGetOut, 401: ErrorOut, 422: ErrorOut},
    summary="Several documents: a glob over collection/path, or a comma list of paths and #docids",
)
def documents_multi_get(
    request,
    pattern: str = Query(..., min_length=1, max_length=10000),
    max_bytes: int | None = Query(
        None, ge=1, description="skip larger documents; default 10240, at most max_total_bytes"
    ),
    max_lines: int | None = Query(None, ge=0),
    collection: list[str] = Query(default_factory=list),
):
    result = multi_get(
        pattern, max_bytes=max_bytes, max_lines=max_lines, collections=collection or None, access=request.auth
    )
    return result.as_dict()
