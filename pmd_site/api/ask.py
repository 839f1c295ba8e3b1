"""/api/ask: a question answered from the caller's notes, whole or streamed as server-sent events
(`stream: true`: events `passages`, `token` {text}, `done` {the answer}); the service is
search.pipeline.answer, as for `pmd ask`, the web Ask mode and MCP pmd_ask."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from ninja import Field, Router

from indexing.selectors import answers_recent
from indexing.services.answers import conversation_delete
from pmd_site.api.schemas import BodyIn, ErrorOut
from search import AskOut, AskRequest, FiltersIn, SearchFilters, answer_from_record, ask_open, ask_run, ask_sse

router = Router(tags=["ask"])


class AskIn(BodyIn):
    question: str = Field(min_length=1, max_length=2000, description="the question; filters such as tag:db too")
    collections: list[str] = Field(default_factory=list, description="ask only these collections")
    filters: FiltersIn | None = None
    conversation: str | None = Field(None, max_length=64, description="a follow-up: the previous answer's conversation")
    budget: int | None = Field(None, ge=200, le=200_000, description="tokens of passages (PMD_ANSWER_BUDGET)")
    stream: bool = Field(False, description="send server-sent events as the answer is written")


def ask_request_from(data: AskIn, *, access) -> AskRequest:
    given = data.filters.dict(exclude_none=True) if data.filters is not None else None
    return AskRequest(
        question=data.question,
        access=access,
        collections=list(data.collections),
        filters=SearchFilters.from_dict(given),
        conversation=data.conversation,
        budget=data.budget,
    )


@router.post(
    "/ask",
    response={200: AskOut, 401: ErrorOut, 404: ErrorOut, 422: ErrorOut, 429: ErrorOut, 503: ErrorOut},
    summary="Answer a question from the notes, citing them (stream: server-sent events)",
)
def ask_post(request, body: AskIn):
    ask = ask_request_from(body, access=request.auth)
    if not body.stream:
        return ask_run(ask).as_dict()
    response = StreamingHttpResponse(ask_sse(ask_open(ask)), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a proxy in front passes each event on at once
    return response


@router.get("/answers", response={200: list[AskOut], 401: ErrorOut}, summary="Your latest answers")
def answers_get(request):
    return [answer_from_record(a).as_dict() for a in answers_recent(access=request.auth)]


@router.delete(
    "/answers/{conversation}",
    response={200: dict, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    summary="Delete one of your conversations",
)
def conversation_delete_view(request, conversation: str):
    return {"deleted": conversation_delete(access=request.auth, conversation=conversation)}
