"""What changed in the notes since a time, and who changed them: through pmd (its write tools and
API, from the audit trail), on disk (a person in their editor, a sync; from the index) or by a
commit (from the history). Only in the collections the caller sees."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from indexing import errors
from indexing.access import Access, visible_collections
from indexing.models import AuditEvent, Commit, Document

MAX_ACTIVITY = 200


@dataclass(frozen=True)
class Activity:
    at: datetime
    collection: str
    path: str
    action: str  # created, replaced, edited, moved, deleted, restored, changed, removed, committed
    by: str
    via: str  # pmd, disk, commit
    old_path: str = ""
    detail: str = ""  # a trash path, a commit's sha and title

    def as_dict(self) -> dict:
        return {
            "at": self.at.isoformat(),
            "collection": self.collection,
            "path": self.path,
            "uri": f"pmd://{self.collection}/{self.path}",
            "action": self.action,
            "by": self.by,
            "via": self.via,
            "old_path": self.old_path,
            "detail": self.detail,
        }


_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def activity_since(text: str) -> datetime:
    """`2026-01-05T09:00Z` or a span back from now (`30m`, `6h`, `2d`, `1w`)."""
    text = text.strip()
    if text[:-1].isdigit() and text[-1:] in _UNITS:
        return datetime.now(timezone.utc) - timedelta(**{_UNITS[text[-1]]: int(text[:-1])})
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise errors.InvalidRequest(f"'{text}' is not a time: give an ISO time or a span like 30m, 6h, 2d") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


_ACTIONS = {
    "note.create": "created",
    "note.replace": "replaced",
    "note.edit": "edited",
    "note.move": "moved",
    "note.delete": "deleted",
    "note.restore": "restored",
}


def notes_activity(
    *, access: Access, since: datetime, limit: int = 50, collections: list[str] | None = None
) -> list[Activity]:
    """The changes since `since`, newest first, at most `limit`."""
    if since.tzinfo is None:
        since = since.replace(tzinfo=timezone.utc)
    limit = max(1, min(int(limit), MAX_ACTIVITY))
    visible = visible_collections(access)
    if collections:
        visible = visible.filter(name__in=collections)
    names = set(visible.values_list("name", flat=True))
    found: list[Activity] = []
    through_pmd: set[tuple[str, str]] = set()
    made_by_pmd: set[str] = set()
    events = AuditEvent.objects.filter(action__startswith="note.", at__gte=since, detail__collection__in=sorted(names))
    for event in events.order_by("-at")[:limit]:
        d = event.detail
        through_pmd.update(
            {(d.get("collection", ""), d.get("path", "")), (d.get("collection", ""), d.get("old_path", ""))}
        )
        if d.get("commit"):
            made_by_pmd.add(d["commit"])
        found.append(
            Activity(
                event.at,
                d.get("collection", ""),
                d.get("path", ""),
                _ACTIONS.get(event.action, event.action),
                event.actor_label,
                "pmd",
                old_path=d.get("old_path", ""),
                detail=d.get("trash_path", "") if event.action == "note.delete" else "",
            )
        )
    documents = (
        Document.objects.filter(collection__in=visible)
        .filter(updated_at__gte=since)
        .select_related("collection")
        .order_by("-updated_at")[: limit * 2]
    )
    for doc in documents:
        if (doc.collection.name, doc.path) in through_pmd:
            continue
        changed_at = datetime.fromtimestamp(doc.mtime, timezone.utc) if doc.active and doc.mtime else doc.updated_at
        found.append(
            Activity(changed_at, doc.collection.name, doc.path, "changed" if doc.active else "removed", "", "disk")
        )
    commits = Commit.objects.filter(collection__in=visible, committed_at__gte=since).select_related("collection")
    for commit in commits.order_by("-committed_at")[:limit]:
        if commit.sha in made_by_pmd:
            continue
        for path in commit.paths[:20] or [""]:
            found.append(
                Activity(
                    commit.committed_at,
                    commit.collection.name,
                    path,
                    "committed",
                    f"{commit.author_name} <{commit.author_email}>",
                    "commit",
                    detail=f"{commit.sha[:12]} {commit.title}",
                )
            )
    found.sort(key=lambda a: a.at, reverse=True)
    return found[:limit]
