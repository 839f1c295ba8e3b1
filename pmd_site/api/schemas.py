"""Schemas more than one resource answers with: the error body and a job (collections start jobs)."""

from typing import Any

from ninja import Schema

from search import StrictIn


class BodyIn(Schema, StrictIn):
    """Every JSON body the API reads: a field it does not know is a 422 naming it (and the nearest
    known one), never silently dropped (`{"collection": "notes"}` would search every collection)."""


class ErrorOut(Schema):
    message: str
    suggestions: list[str] = []
    code: str | None = None


class JobOut(Schema):
    id: str
    kind: str
    collection: str | None
    state: str
    done: int
    total: int
    percent: int
    message: str
    result: dict[str, Any]
    created_at: str
    started_at: str | None
    finished_at: str | None


def job_row(job) -> dict:
    """A Job as JobOut."""

    def iso(value):
        return value.isoformat() if value else None

    return {
        "id": str(job.id),
        "kind": job.kind,
        "collection": job.collection.name if job.collection else None,
        "state": job.state,
        "done": job.done,
        "total": job.total,
        "percent": job.percent,
        "message": job.message,
        "result": job.result,
        "created_at": iso(job.created_at),
        "started_at": iso(job.started_at),
        "finished_at": iso(job.finished_at),
    }
