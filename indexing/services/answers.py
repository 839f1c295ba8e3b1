"""Answers asked of the notes (search.pipeline.answer): kept per user so that the asker sees them
again and a follow-up builds on them; the asker deletes a conversation whenever they like."""

from __future__ import annotations

from indexing.access import Access, answers_visible_to, refuse_read_only
from indexing.errors import ConversationNotFound
from indexing.models import Answer


def answer_record(
    *,
    user,
    conversation,
    question: str,
    text: str,
    state: str,
    model: str,
    tokens_in: int,
    tokens_out: int,
    passages: list[dict],
    cited: list[int],
    flags: list[dict],
    retrieval_ms: float,
    first_token_ms: float | None,
    total_ms: float,
) -> Answer:
    return Answer.objects.create(
        user=user,
        conversation=conversation,
        question=question,
        text=text,
        state=state,
        model=model,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        passages=passages,
        cited=cited,
        flags=flags,
        retrieval_ms=round(retrieval_ms, 2),
        first_token_ms=None if first_token_ms is None else round(first_token_ms, 2),
        total_ms=round(total_ms, 2),
    )


def conversation_delete(*, access: Access, conversation) -> int:
    """Forget one conversation of this user (a user never reaches another's, nor a token one that
    drew on collections outside its scope); the answers deleted."""
    refuse_read_only(access, "deleting a conversation")
    deleted, _ = Answer.objects.filter(
        pk__in=answers_visible_to(access).of_conversation(conversation).values("pk")
    ).delete()
    if not deleted:
        raise ConversationNotFound(f"no conversation {conversation} of yours")
    return deleted
