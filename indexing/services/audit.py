"""The audit trail: who changed what matters for access (collections, sharing, tokens, contexts, groups).

Written by the services that make those changes, so every face leaves the same record.
"""

from __future__ import annotations

from indexing.access import Access
from indexing.models import AuditEvent


def audit_record(access: Access | None, action: str, target: str = "", **detail) -> AuditEvent:
    """Record one change; `access` None is the server itself (a migration, a periodic task)."""
    user = access.user if access is not None and not access.local else None
    label = access.label if access is not None else "pmd"
    return AuditEvent.objects.create(
        actor=user, actor_label=label[:200], action=action, target=target[:300], detail=detail
    )


def audit_list(*, limit: int = 50, action: str | None = None, target: str | None = None) -> list[AuditEvent]:
    """The newest events first (`action` matches a prefix: `collection` for every collection event)."""
    events = AuditEvent.objects.select_related("actor")
    if action:
        events = events.filter(action__startswith=action)
    if target:
        events = events.filter(target__icontains=target)
    return list(events[: max(1, limit)])
