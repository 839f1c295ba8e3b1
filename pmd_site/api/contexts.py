"""/api/contexts: the descriptions search results carry (set and remove: staff)."""

from ninja import Field, Query, Router, Schema
from ninja.pagination import LimitOffsetPagination, paginate

from indexing.selectors import context_list
from indexing.services.contexts import context_remove, context_set
from pmd_site.api.schemas import BodyIn, ErrorOut

router = Router(tags=["contexts"])


class ContextOut(Schema):
    target: str
    text: str


class ContextIn(BodyIn):
    target: str = Field("/", max_length=4096, description="/ (global), pmd://collection/prefix or collection/prefix")
    text: str = Field(..., min_length=1, max_length=20000)


@router.get("", response=list[ContextOut])
@paginate(LimitOffsetPagination)
def contexts_list(request):
    return [{"target": c.target, "text": c.text} for c in context_list(access=request.auth)]


@router.put(
    "",
    response={200: ContextOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    summary="Set the context text at a target (staff)",
)
def context_put(request, body: ContextIn):
    context = context_set(target=body.target, text=body.text, access=request.auth)
    return {"target": context.target, "text": context.text}


@router.delete("", response={200: dict, 403: ErrorOut, 404: ErrorOut}, summary="Remove the context at a target (staff)")
def context_delete(request, target: str = Query(..., min_length=1, max_length=4096)):
    return {"deleted": context_remove(target=target, access=request.auth)}
