"""What `pmd status` and the web status page show about embeddings (read-only, no network)."""

from __future__ import annotations

from indexing.models import Chunk, EmbeddingFingerprint, Job
from indexing.services.embedding.config import embedding_config, fingerprint_configured
from indexing.services.embedding.hnsw import hnsw_index_exists
from indexing.services.embedding.lock import embedding_running
from indexing.services.embedding.pending import pending_contents, wanted_contents


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
            {"model": o.model, "dims": o.dims, "chunking": o.chunk_params,
             "contents": o.contents.count(), "chunks": o.chunks.count()}
            for o in others
        ],
        "job": None,
    }
    if fingerprint is not None:
        pending = pending_contents(fingerprint, collections=collections).count()
        status.update(
            fingerprint={"key": fingerprint.key, "model": fingerprint.model, "dims": fingerprint.dims,
                         "chunking": fingerprint.chunk_params, "created_at": fingerprint.created_at.isoformat()},
            embedded=wanted - pending,
            pending=pending,
            # Of the named collections only, when some are named (a member's status: the index's
            # total would count notes they cannot see).
            chunks=Chunk.objects.filter(fingerprint=fingerprint, **(
                {"content_id__in": wanted_contents(collections=collections)} if collections else {})).count(),
            hnsw_index=hnsw_index_exists(fingerprint),
        )
    status["mismatch"] = bool(status["stale_fingerprints"]) and (fingerprint is None or status["pending"] > 0)
    status["ok"] = not status["mismatch"]
    if status["mismatch"]:
        held = ", ".join(sorted({o["model"] for o in status["stale_fingerprints"]}))
        from indexing.services.index_config import index_config_effective

        overridden = [f"{r['name']}={r['value']} (the index says {r['index']})"
                      for r in index_config_effective() if r["mismatch"]]
        status["hint"] = (f"the index holds vectors of {held}; this process asks for {config.model}"
                          + (f" because its environment sets {', '.join(overridden)}" if overridden else "")
                          + (": unset it to use the index's" if overridden else
                             ": embedding with the new setup replaces them (`pmd embed --yes`)"))
    elif status["pending"]:
        status["hint"] = f"{status['pending']} note(s) or commit(s) without embeddings: run `pmd embed`"
    job = Job.objects.filter(kind=Job.Kind.EMBED).order_by("-created_at").first()
    if job is not None:
        state = job.state
        if state == Job.State.RUNNING and not embedding_running():
            state = "interrupted"  # its process died; the next `pmd embed` resumes
        status["job"] = {"id": str(job.id), "state": state, "done": job.done, "total": job.total,
                         "percent": job.percent, "message": job.message,
                         "created_at": job.created_at.isoformat()}
    return status
