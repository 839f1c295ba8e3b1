"""What `pmd status` and the web status page show about embeddings (read-only, no network)."""

from __future__ import annotations

from django.db.models import Count, Exists, OuterRef, Q

from indexing.models import Chunk, Commit, ContentEmbedding, Document, EmbeddingFingerprint, Job
from indexing.services.embedding.config import embedding_config, fingerprint_configured
from indexing.services.embedding.hnsw import hnsw_index_exists
from indexing.services.embedding.lock import embedding_running
from indexing.services.embedding.pending import pending_contents, wanted_contents
from indexing.services.index_config import index_config_effective


def embedding_status(*, collections: list[str] | None = None) -> dict:
    """What `pmd status` (and the web status page) show about embeddings. No network."""
    config = embedding_config()
    fingerprint = fingerprint_configured(config)
    wanted = wanted_contents(collections=collections).count()
    others = EmbeddingFingerprint.objects.all()
    if fingerprint is not None:
        others = others.exclude(pk=fingerprint.pk)
    status = {
        "ok": True,
        "backend": config.backend,
        "model": config.model,
        "chunking": config.chunk_params.describe(),
        "fingerprint": None,
        "contents": wanted,
        "embedded": 0,
        "pending": wanted,
        "chunks": 0,
        "hnsw_index": False,
        "stale_fingerprints": [
            {
                "model": o.model,
                "dims": o.dims,
                "chunking": o.chunk_params,
                "contents": o.contents.count(),
                "chunks": o.chunks.count(),
            }
            for o in others
        ],
        "job": None,
    }
    if fingerprint is not None:
        pending = pending_contents(fingerprint, collections=collections).count()
        status.update(
            fingerprint={
                "key": fingerprint.key,
                "model": fingerprint.model,
                "dims": fingerprint.dims,
                "chunking": fingerprint.chunk_params,
                "created_at": fingerprint.created_at.isoformat(),
            },
            embedded=wanted - pending,
            pending=pending,
            # Of the named collections only, when some are named (a member's status: the index's
            # total would count notes they cannot see).
            chunks=Chunk.objects.filter(
                fingerprint=fingerprint,
                **({"content_id__in": wanted_contents(collections=collections)} if collections else {}),
            ).count(),
            hnsw_index=hnsw_index_exists(fingerprint),
        )
    status["mismatch"] = bool(status["stale_fingerprints"]) and (fingerprint is None or status["pending"] > 0)
    status["ok"] = not status["mismatch"]
    if status["mismatch"]:
        held = ", ".join(sorted({o["model"] for o in status["stale_fingerprints"]}))
        overridden = [
            f"{r['name']}={r['value']} (the index says {r['index']})" for r in index_config_effective() if r["mismatch"]
        ]
        status["hint"] = (
            f"the index holds vectors of {held}; this process asks for {config.model}"
            + (f" because its environment sets {', '.join(overridden)}" if overridden else "")
            + (
                ": unset it to use the index's"
                if overridden
                else ": embedding with the new setup replaces them (`pmd embed --yes`)"
            )
        )
    job = Job.objects.filter(kind=Job.Kind.EMBED).order_by("-created_at").first()
    if job is not None:
        state = job.state
        if state == Job.State.RUNNING and not embedding_running():
            state = "interrupted"  # its process died; the next `pmd embed` resumes
        status["job"] = {
            "id": str(job.id),
            "state": state,
            "done": job.done,
            "total": job.total,
            "percent": job.percent,
            "message": job.message,
            "created_at": job.created_at.isoformat(),
        }
    status.update(_state(status["pending"]))
    if not status["mismatch"] and status["pending"]:
        # what to do follows where embedding stands (`state`), the one source every face reads
        status["hint"] = _PENDING_HINTS[status["state"]].format(n=status["pending"])
    status["progress"] = embedding_progress(fingerprint=fingerprint, collections=collections)
    if status["state"] == "waiting":
        status["ok"] = False  # nothing is embedded while it waits: never green
    return status


def embedding_underway() -> str:
    """What a search missing vectors may tell the user to expect ("" when no embedding is on its
    way): while a worker embeds, advice to run `pmd embed` would be wrong."""
    if embedding_running():
        return "being embedded now"
    if embedding_waiting().exists():
        return "queued for embedding, waiting for the model server (`pmd status` says why)"
    if Job.objects.filter(kind=Job.Kind.EMBED, state__in=[Job.State.QUEUED, Job.State.RUNNING]).exists():
        return "queued for embedding"
    return ""


def embedding_waiting():
    """Jobs of embedding requests waiting for the LLM backend (a queryset; indexing/services/embedding_queue.py
    parks them)."""
    return Job.objects.filter(kind=Job.Kind.EMBED, state=Job.State.QUEUED, result__has_key="waiting")


_PENDING_HINTS = {
    "running": "{n} note(s) or commit(s) still to embed",
    "waiting": "{n} note(s) or commit(s) still to embed once the model server answers",
    "queued": "{n} note(s) or commit(s) to embed when a worker takes the request (`pmd up` runs one)",
    "pending": "{n} note(s) or commit(s) without embeddings: run `pmd embed`",
    "done": "{n} note(s) or commit(s) without embeddings: run `pmd embed`",
}


def _state(pending: int) -> dict:
    """Where embedding stands: `running`, `waiting` (for the model server: why, and the next check),
    `queued` (no worker took it yet), `pending` (nothing asked for it) or `done`."""
    waiting = list(embedding_waiting().order_by("created_at"))
    checker = next((j for j in waiting if j.result["waiting"].get("checks") is not None), None)
    checker = checker or (waiting[0] if waiting else None)
    if checker is not None:
        marker = checker.result["waiting"]
        reason = checker.message.removeprefix("waiting for the LLM backend: ")
        return {
            "state": "waiting",
            "reason": reason,
            "waiting_since": marker.get("since"),
            "next_check_at": marker.get("next_check_at"),
            "checks": marker.get("checks"),
        }
    if embedding_running():
        return {"state": "running"}
    if not pending:
        return {"state": "done"}
    if Job.objects.filter(kind=Job.Kind.EMBED, state=Job.State.QUEUED).exists():
        return {"state": "queued"}
    return {"state": "pending", "reason": "nothing asked for it yet: `pmd embed` (or a worker, once it starts)"}


def embedding_progress(*, fingerprint: EmbeddingFingerprint | None, collections: list[str] | None = None) -> list[dict]:
    """Per collection, how many notes and commits there are and how many have vectors (counted by
    content, as embedding works: two notes with the same text are one)."""
    done = (
        Exists(ContentEmbedding.objects.filter(content=OuterRef("content"), fingerprint=fingerprint))
        if fingerprint is not None
        else None
    )
    rows: dict[str, dict] = {}
    for kind, model, extra in (("notes", Document, {"active": True}), ("commits", Commit, {})):
        items = model.objects.filter(**extra)
        if collections:
            items = items.filter(collection__name__in=collections)
        embedded = Count("content", distinct=True, filter=Q(has_vectors=True)) if done is not None else None
        if done is not None:
            items = items.annotate(has_vectors=done)
        counted = items.values("collection__name").annotate(
            total=Count("content", distinct=True), **({"embedded": embedded} if embedded else {})
        )
        for row in counted.order_by():
            name = row["collection__name"]
            entry = rows.setdefault(
                name, {"name": name, "notes": 0, "notes_embedded": 0, "commits": 0, "commits_embedded": 0}
            )
            entry[kind] = row["total"]
            entry[f"{kind}_embedded"] = row.get("embedded", 0)
    return [rows[name] for name in sorted(rows)]
