"""Failed bearer-token attempts per client address, for the API and the MCP endpoint.

After PMD_TOKEN_FAILURE_LIMIT wrong tokens from one address within PMD_TOKEN_COOLOFF_MINUTES,
that address is blocked for PMD_TOKEN_COOLOFF_MINUTES: every token it presents, even a valid
one, is answered 429 with Retry-After. A token cannot be guessed (240 random bits), but a
client hammering the endpoint with bad ones is either broken or probing, and either way should
stop. Counts live in PostgreSQL (indexing.models.TokenFailure), so all web workers share them;
one upsert statement per failure keeps concurrent failures from being lost.
"""

from __future__ import annotations

import math
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from indexing.errors import AskThrottled, TokenThrottled
from indexing.models import Answer, TokenFailure


def _enabled() -> bool:
    return settings.PMD_TOKEN_FAILURE_LIMIT > 0


def _cooloff() -> timedelta:
    return timedelta(minutes=settings.PMD_TOKEN_COOLOFF_MINUTES)


def check_token_block(address: str | None) -> None:
    """Raise TokenThrottled while `address` is blocked."""
    if not _enabled():
        return
    now = timezone.now()
    blocked_until = (
        TokenFailure.objects.filter(address=address or "", blocked_until__gt=now)
        .values_list("blocked_until", flat=True)
        .first()
    )
    if blocked_until is not None:
        raise TokenThrottled(math.ceil((blocked_until - now).total_seconds()))


def record_token_failure(address: str | None) -> int:
    """Count one failed token from `address`; returns the failures in its current window."""
    if not _enabled():
        return 0
    now = timezone.now()
    window_floor = now - _cooloff()
    block_end = now + _cooloff()
    table = TokenFailure._meta.db_table
    with connection.cursor() as cursor:
        # A window older than the cool-off starts again at 1; reaching the limit sets the block.
        cursor.execute(
            f"""
            INSERT INTO {table} AS f (address, failures, window_start, blocked_until)
            VALUES (%(address)s, 1, %(now)s, CASE WHEN 1 >= %(limit)s THEN %(block_end)s END)
            ON CONFLICT (address) DO UPDATE SET
                failures = CASE WHEN f.window_start < %(floor)s THEN 1 ELSE f.failures + 1 END,
                window_start = CASE WHEN f.window_start < %(floor)s THEN %(now)s ELSE f.window_start END,
                blocked_until = CASE
                    WHEN (CASE WHEN f.window_start < %(floor)s THEN 1 ELSE f.failures + 1 END) >= %(limit)s
                         AND (f.blocked_until IS NULL OR f.blocked_until <= %(now)s)
                    THEN %(block_end)s ELSE f.blocked_until END
            RETURNING failures
            """,
            {
                "address": address or "",
                "now": now,
                "floor": window_floor,
                "block_end": block_end,
                "limit": settings.PMD_TOKEN_FAILURE_LIMIT,
            },
        )
        failures = cursor.fetchone()[0]
        # Forget addresses whose window and block are both over, so the table stays small.
        cursor.execute(
            f"DELETE FROM {table} WHERE window_start < %s AND (blocked_until IS NULL OR blocked_until <= %s)",
            [window_floor, now],
        )
    return failures


def reset_token_failures(address: str | None = None) -> int:
    """Forget failures (of one address, or all); returns how many addresses were cleared."""
    qs = TokenFailure.objects.all() if address is None else TokenFailure.objects.filter(address=address)
    return qs.delete()[0]


def ask_rate_check(*, user) -> None:
    """Raise AskThrottled when `user` asked PMD_ANSWER_RATE questions in the last minute. Counted
    from the recorded answers (indexing.models.Answer), so every web worker sees the same count;
    the local user (the CLI, no account) is not limited."""
    limit = settings.PMD_ANSWER_RATE
    if limit <= 0 or user is None:
        return
    now = timezone.now()
    window = now - timedelta(minutes=1)
    recent = list(
        Answer.objects.filter(user=user, created_at__gt=window)
        .order_by("-created_at")
        .values_list("created_at", flat=True)[:limit]
    )
    if len(recent) >= limit:
        raise AskThrottled(math.ceil((recent[-1] - window).total_seconds()))
