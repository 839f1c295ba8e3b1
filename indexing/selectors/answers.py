"""Reads: the answers Ask gave, to see again or to follow up, and what they cost per model."""

from __future__ import annotations

from django.db.models import Aggregate, Count, FloatField, Sum

from indexing import errors
from indexing.access import Access, answers_visible_to
from indexing.models import Answer


def conversation_answers(*, access: Access, conversation) -> list:
    """The answers of one conversation of this user, oldest first (a follow-up's context)."""
    answers = list(answers_visible_to(access).of_conversation(conversation).order_by("created_at", "id"))
    if not answers:
        raise errors.ConversationNotFound(f"no conversation {conversation} of yours")
    return answers


def answers_recent(*, access: Access, limit: int = 20) -> list:
    """This user's latest answers, newest first (what the asker sees again)."""
    return list(answers_visible_to(access)[:limit])


def answer_costs() -> list[dict]:
    """Per model: answers, tokens in and out, median latency to the whole answer and to its first
    token (staff's view in the status report: what Ask costs, and whether a model got slow)."""

    class Median(Aggregate):
        template = "percentile_cont(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
        output_field = FloatField()

    rows = (
        Answer.objects.exclude(model="")
        .values("model")
        .annotate(
            answers=Count("id"),
            tokens_in=Sum("tokens_in"),
            tokens_out=Sum("tokens_out"),
            median_ms=Median("total_ms"),
            median_first_token_ms=Median("first_token_ms"),
        )
        .order_by("model")
    )
    return [
        {
            **row,
            "median_ms": round(row["median_ms"] or 0, 1),
            "median_first_token_ms": round(row["median_first_token_ms"] or 0, 1),
        }
        for row in rows
    ]
