"""The files a scan could not index cleanly, as people read them: by kind, errors first, each kind
counted on its own, so a file that was not indexed is not lost after a thousand unresolved links.

Every face that lists problems (`pmd status`, `pmd collection show`, the web status page) reads
them from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Case, Count, IntegerField, Q, Value, When

from indexing.access import Access
from indexing.models import FileProblem
from indexing.services.links import LINK_PROBLEM_PREFIX

# (kind, what a person calls it) in the order they are listed: what was not indexed first.
KINDS = (
    ("error", "not indexed"),
    ("warning", "indexed with a warning"),
    ("link", "unresolved links"),
)
_RANK = {kind: n for n, (kind, _) in enumerate(KINDS)}
_LINK = Q(message__startswith=LINK_PROBLEM_PREFIX)


def kind_of(problem) -> str:
    """error, warning or link: the kind of a problem (a row or a dict with severity and message)."""
    message = problem["message"] if isinstance(problem, dict) else problem.message
    severity = problem["severity"] if isinstance(problem, dict) else problem.severity
    if message.startswith(LINK_PROBLEM_PREFIX):
        return "link"
    return "error" if severity == "error" else "warning"


@dataclass
class ProblemKind:
    kind: str  # error, warning, link
    label: str
    count: int


def kind_order():
    """An expression ranking a problem by its kind (KINDS order): order by it to list errors first."""
    return Case(
        When(_LINK, then=Value(_RANK["link"])),
        When(severity="error", then=Value(_RANK["error"])),
        default=Value(_RANK["warning"]),
        output_field=IntegerField(),
    )


def _visible(access: Access, collection_id: int | None = None):
    problems = FileProblem.objects.all()
    if access.collection_ids() is not None:
        problems = problems.filter(collection_id__in=access.collection_ids())
    if collection_id is not None:
        problems = problems.filter(collection_id=collection_id)
    return problems


def problem_counts(access: Access, *, collection_id: int | None = None) -> list[ProblemKind]:
    """How many problems of each kind (only the kinds there are), in KINDS order."""
    rows = dict(_visible(access, collection_id).annotate(rank=kind_order()).values_list("rank").annotate(n=Count("id")))
    return [ProblemKind(kind, label, rows[n]) for n, (kind, label) in enumerate(KINDS) if rows.get(n)]


def problems_in_order(access: Access, *, collection_id: int | None = None, per_kind: int | None = 10) -> list[dict]:
    """The problems, errors first, then warnings, then unresolved links, at most `per_kind` of each:
    [{kind, collection, path, severity, message}]."""
    rows: list[dict] = []
    problems = _visible(access, collection_id).select_related("collection")
    for kind, _ in KINDS:
        if kind == "link":
            of_kind = problems.filter(_LINK)
        elif kind == "error":
            of_kind = problems.exclude(_LINK).filter(severity="error")
        else:
            of_kind = problems.exclude(_LINK).exclude(severity="error")
        for p in of_kind.order_by("collection_id", "path", "id")[:per_kind]:
            rows.append(
                {
                    "kind": kind,
                    "collection": p.collection.name,
                    "path": p.path,
                    "severity": p.severity,
                    "message": p.message,
                }
            )
    return rows


def counts_text(counts: list[ProblemKind]) -> str:
    """`2 not indexed, 1,680 unresolved links`; "none" without any."""
    return ", ".join(f"{c.count:,} {c.label}" for c in counts) or "none"
