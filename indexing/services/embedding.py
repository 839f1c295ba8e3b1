"""Embedding the indexed content: chunk, call the LLM backend in batches, store vectors.

What is pending is derived from the database, never from a queue: a content is
pending for the configured fingerprint (model + dims + chunking + document
prompt) when an active document points at it and no `ContentEmbedding` marker
exists for it. That gives the guarantees the workers need:

* staleness is automatic: a scan that changes a file gives the document a new
  content hash, which has no marker, so it is pending; unchanged content (or a
  file copied elsewhere) costs nothing;
* idempotent: chunks are unique per (fingerprint, content, seq) and inserted with
  ON CONFLICT DO NOTHING; a duplicate delivery of the task finds the run lock
  taken (or nothing pending) and does nothing;
* a worker killed mid-batch loses only the batch in flight: every batch commits
  its chunks, and a content's marker is written in the same transaction as its
  last chunk; the next run re-chunks a partly stored content (chunking is
  deterministic) and embeds only the missing sequence numbers. The run lock is a
  session-level advisory lock, released by PostgreSQL when the dead worker's
  connection goes away; its job record is then marked as interrupted;
* switching model (or chunk size, or prompt) is a new fingerprint: everything
  becomes pending for it, vector search only ever reads one fingerprint, and the
  old vectors are dropped once the new ones cover every active document.

HNSW index: the `embedding` column is an untyped `vector`, so one table holds any
dimension. pgvector can only index one dimension at a time, so each fingerprint
gets a partial expression index
``USING hnsw ((embedding::vector(D)) vector_cosine_ops) WHERE fingerprint_id = N``
created at the end of a run (building after a bulk load is much faster than
inserting into an existing graph) and dropped with its fingerprint. Vector search
uses the same expression and predicate so the planner can pick it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from indexing.chunking import Chunk as TextChunk
from indexing.chunking import ChunkParams, chunk_markdown
from indexing.models import Chunk, Content, ContentEmbedding, Document, EmbeddingFingerprint, Job
from indexing.services.jobs import JobProgress, job_fail, job_finish, job_start
from indexing.locks import EMBEDDING, advisory_lock_release, advisory_lock_taken, advisory_lock_try
from search.llm import BackendError, EmbedPrompts, LLMBackend, embedding_prompts, get_backend

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[int, int, str], None]
CONTENTS_PER_ROUND = 64  # contents loaded and chunked at a time
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 128


class EmbeddingError(BackendError):
    """Embedding cannot go on; the message says what to do."""

    code = "embedding_failed"


class EmbeddingInProgress(EmbeddingError):
    """Another process is embedding for the same fingerprint right now."""

    code = "embedding_in_progress"
    http_status = 409
    summary = ""


# --- configuration and fingerprint ----------------------------------------------------------


@dataclass(frozen=True)
class EmbeddingConfig:
    backend: str
    model: str
    chunk_params: ChunkParams
    prompts: EmbedPrompts
    batch_size: int

    def key(self, dims: int) -> str:
        described = json.dumps(
            {"model": self.model, "dims": dims, "chunking": self.chunk_params.describe(),
             "document_prompt": self.prompts.document},
            sort_keys=True,
        )
        return hashlib.sha256(described.encode()).hexdigest()[:32]


def chunk_params_from_settings() -> ChunkParams:
    return ChunkParams(
        max_tokens=settings.PMD_CHUNK_TOKENS,
        overlap=settings.PMD_CHUNK_OVERLAP,
        window=settings.PMD_CHUNK_WINDOW,
    )


def embedding_config() -> EmbeddingConfig:
    """The embedding setup the settings ask for (no network)."""
    try:
        params = chunk_params_from_settings()
    except ValueError as exc:
        raise EmbeddingError(f"chunking settings: {exc}") from None
    model = settings.PMD_EMBED_MODEL.strip()
    if settings.PMD_LLM_BACKEND == "ollama":
        model = model.removesuffix(":latest")  # the same Ollama model either way: one fingerprint
    return EmbeddingConfig(
        backend=settings.PMD_LLM_BACKEND,
        model=model,
        chunk_params=params,
        prompts=embedding_prompts(model),
        batch_size=settings.PMD_EMBED_BATCH,
    )


def fingerprint_ensure(*, config: EmbeddingConfig | None = None, backend: LLMBackend | None = None) -> EmbeddingFingerprint:
    """The fingerprint for the configured setup, asking the backend for the dimension."""
    config = config or embedding_config()
    backend = backend or get_backend()
    dims = backend.embedding_dims(config.model)
    fingerprint, _ = EmbeddingFingerprint.objects.get_or_create(
        key=config.key(dims),
        defaults=dict(model=config.model, dims=dims, backend=config.backend,
                      chunk_params=config.chunk_params.describe(), document_prompt=config.prompts.document),
    )
    return fingerprint


def fingerprint_configured(config: EmbeddingConfig | None = None, *, dims: int | None = None) -> EmbeddingFingerprint | None:
    """The stored fingerprint matching the settings, without asking the backend."""
    config = config or embedding_config()
    if dims is not None:
        return EmbeddingFingerprint.objects.filter(key=config.key(dims)).first()
    return (
        EmbeddingFingerprint.objects.filter(
            model=config.model, chunk_params=config.chunk_params.describe(), document_prompt=config.prompts.document,
        )
        .order_by("-last_used_at")
        .first()
    )


# --- what is pending ------------------------------------------------------------------------


def _active_documents(collections: list[str] | None):
    documents = Document.objects.filter(active=True)
    if collections:
        documents = documents.filter(collection__name__in=collections)
    return documents


def pending_contents(fingerprint: EmbeddingFingerprint, *, collections: list[str] | None = None):
    """Hashes of the content active documents use that is not fully embedded for
    `fingerprint` (a queryset of strings). Asked from the documents' side so that
    counting never reads the content bodies."""
    done = ContentEmbedding.objects.filter(content=OuterRef("content"), fingerprint=fingerprint)
    return (_active_documents(collections).filter(~Exists(done))
            .values_list("content_id", flat=True).distinct().order_by("content_id"))


_PENDING_TTL = 30.0
_pending_cache: dict[tuple, tuple[float, int]] = {}


def pending_count(fingerprint: EmbeddingFingerprint, collections: list[str] | None) -> int:
    """How many documents vector search cannot see yet. One probe per active document
    (≈2 µs each), so long-running servers reuse the answer for a few seconds; the cache
    lives here, with `forget_pending_counts`, which every embedding run calls."""
    key = (fingerprint.pk, tuple(sorted(collections or ())))
    now = time.monotonic()
    cached = _pending_cache.get(key)
    if cached and now - cached[0] < _PENDING_TTL:
        return cached[1]
    count = pending_contents(fingerprint, collections=collections).count()
    _pending_cache[key] = (now, count)
    return count


def forget_pending_counts() -> None:
    """Embedding just changed what is pending."""
    _pending_cache.clear()


def wanted_contents(*, collections: list[str] | None = None):
    """Hashes of the content active documents use (a queryset of strings)."""
    return _active_documents(collections).values_list("content_id", flat=True).distinct().order_by("content_id")


# --- the run ----------------------------------------------------------------------------------


@dataclass
class EmbedReport:
    model: str = ""
    dims: int = 0
    fingerprint: str = ""
    contents: int = 0          # contents completed in this run
    chunks: int = 0            # chunks embedded in this run
    reused_chunks: int = 0     # chunks found already stored (resumed content)
    pending_before: int = 0
    batches: int = 0
    elapsed: float = 0.0
    embed_seconds: float = 0.0  # time spent waiting for the backend
    interrupted_jobs: int = 0
    dropped_fingerprints: list[str] = field(default_factory=list)
    index_built: bool = False
    batch_texts: list[list[str]] | None = None  # filled when asked (benchmarks)

    @property
    def chunks_per_second(self) -> float:
        return self.chunks / self.elapsed if self.elapsed else 0.0

    def as_dict(self) -> dict:
        data = {k: v for k, v in self.__dict__.items() if k != "batch_texts"}
        data["chunks_per_second"] = round(self.chunks_per_second, 2)
        data["elapsed"] = round(self.elapsed, 3)
        data["embed_seconds"] = round(self.embed_seconds, 3)
        return data


@dataclass
class _Pending:
    content_id: str
    chunk: TextChunk
    text: str  # what the model sees (document prompt applied)


def embed_pending(
    *,
    collections: list[str] | None = None,
    force: bool = False,
    job: Job | None = None,
    progress: ProgressCallback | None = None,
    backend: LLMBackend | None = None,
    record_batches: bool = False,
) -> EmbedReport:
    """Embed every pending content for the configured fingerprint; see the module docstring."""
    started = time.perf_counter()
    config = embedding_config()
    backend = backend or get_backend()
    try:
        fingerprint = fingerprint_ensure(config=config, backend=backend)
    except BackendError as exc:
        if job is not None:
            job_fail(job, message=str(exc))
        raise
    report = EmbedReport(model=fingerprint.model, dims=fingerprint.dims, fingerprint=fingerprint.key,
                         batch_texts=[] if record_batches else None)
    if not _try_lock():
        message = f"another process is already embedding with {fingerprint.model}: wait for it or check `pmd status`"
        if job is not None:
            job_fail(job, message=message)
        raise EmbeddingInProgress(message)
    try:
        report.interrupted_jobs = _mark_interrupted_jobs(job)
        if force:
            _forget(fingerprint, collections)
        pending = list(pending_contents(fingerprint, collections=collections))
        report.pending_before = len(pending)
        if job is not None:
            job_start(job, total=len(pending))
        job_progress = JobProgress(job) if job is not None else None

        def tell(done: int, detail: str) -> None:
            if progress:
                progress(done, len(pending), detail)
            if job_progress:
                job_progress(done, len(pending), detail)

        tell(0, "")
        _run(config, fingerprint, backend, pending, report, tell)
        remaining = pending_contents(fingerprint).exists()
        if not remaining:
            report.dropped_fingerprints = _drop_other_fingerprints(fingerprint)
        if not hnsw_index_exists(fingerprint):
            tell(len(pending), "building the vector index")
        report.index_built = hnsw_index_ensure(fingerprint)
        EmbeddingFingerprint.objects.filter(pk=fingerprint.pk).update(last_used_at=timezone.now())
        report.elapsed = time.perf_counter() - started
        forget_pending_counts()
        if job is not None:
            job_finish(job, result=report.as_dict(), message=f"{report.chunks} chunks embedded")
        return report
    except BaseException as exc:
        if job is not None:
            job_fail(job, message=str(exc) or exc.__class__.__name__)
        raise
    finally:
        _unlock()


def _run(config: EmbeddingConfig, fingerprint: EmbeddingFingerprint, backend: LLMBackend, pending: list[str],
         report: EmbedReport, tell: Callable[[int, str], None]) -> None:
    """Chunk pending contents round by round; embed in batches with one request in flight
    while the previous batch is written."""
    queue: list[_Pending] = []
    remaining: dict[str, int] = {}   # content -> chunks still to store
    stored: dict[str, int] = {}      # content -> chunk count (for its marker)
    completed = 0
    in_flight: tuple[list[_Pending], Future] | None = None

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pmd-embed")
    try:

        def submit(batch: list[_Pending]):
            texts = [p.text for p in batch]
            if report.batch_texts is not None:
                report.batch_texts.append(texts)
            return batch, pool.submit(_timed_embed, backend, texts, config.model)

        def settle(flight) -> None:
            nonlocal completed
            batch, future = flight
            vectors, seconds = future.result()
            report.embed_seconds += seconds
            report.batches += 1
            for vector in vectors:
                if len(vector) != fingerprint.dims:
                    raise EmbeddingError(
                        f"model {fingerprint.model} returned {len(vector)}-dimensional vectors but reported "
                        f"{fingerprint.dims} dimensions: the server's copy looks broken or was replaced "
                        f"while embedding; pull it again (`pmd models pull {fingerprint.model}`) and re-run `pmd embed`"
                    )
            finished = _store(fingerprint, batch, vectors, remaining, stored)
            report.chunks += len(batch)
            report.contents += len(finished)
            completed += len(finished)
            tell(completed, batch[-1].content_id[:12])

        for start in range(0, len(pending), CONTENTS_PER_ROUND):
            hashes = pending[start:start + CONTENTS_PER_ROUND]
            empty = []
            for content_id, items, reused in _prepare(config, fingerprint, hashes):
                report.reused_chunks += reused
                stored[content_id] = len(items) + reused
                if items:
                    remaining[content_id] = len(items)
                    queue.extend(items)
                else:
                    empty.append(content_id)
            if empty:  # blank documents, or every chunk already stored by an earlier run
                _mark_done(fingerprint, {c: stored.pop(c) for c in empty})
                report.contents += len(empty)
                completed += len(empty)
                tell(completed, "")
            while len(queue) >= config.batch_size:
                batch, queue = queue[:config.batch_size], queue[config.batch_size:]
                flight = submit(batch)
                if in_flight is not None:
                    settle(in_flight)
                in_flight = flight
        if queue:
            flight = submit(queue)
            if in_flight is not None:
                settle(in_flight)
            in_flight = flight
        if in_flight is not None:
            settle(in_flight)
    finally:
        # On failure do not send the batch still queued behind the one that failed.
        pool.shutdown(wait=True, cancel_futures=True)


def _timed_embed(backend: LLMBackend, texts: list[str], model: str) -> tuple[list[list[float]], float]:
    began = time.perf_counter()
    vectors = backend.embed(texts, model=model)
    return vectors, time.perf_counter() - began


def _prepare(config: EmbeddingConfig, fingerprint: EmbeddingFingerprint, hashes: list[str]):
    """Chunk each content; yield (content, chunks still to embed, chunks already stored)."""
    bodies = dict(Content.objects.filter(pk__in=hashes).values_list("pk", "body"))
    titles: dict[str, str] = {}
    for content_id, title in (
        Document.objects.filter(content_id__in=hashes, active=True).order_by("content_id", "id")
        .values_list("content_id", "title")
    ):
        titles.setdefault(content_id, title)
    have: dict[str, set[int]] = {}
    for content_id, seq in Chunk.objects.filter(fingerprint=fingerprint, content_id__in=hashes).values_list("content_id", "seq"):
        have.setdefault(content_id, set()).add(seq)
    for content_id in hashes:
        body = bodies.get(content_id)
        if body is None:
            continue
        chunks = chunk_markdown(body, config.chunk_params)
        done = have.get(content_id, set())
        title = titles.get(content_id, "")
        items = [
            _Pending(content_id, c, config.prompts.format_document(c.text.strip(), title=title))
            for c in chunks if c.seq not in done
        ]
        yield content_id, items, len(chunks) - len(items)


def _store(fingerprint: EmbeddingFingerprint, batch: list[_Pending], vectors: list[list[float]],
           remaining: dict[str, int], stored: dict[str, int]) -> list[str]:
    """Write one batch; contents whose last chunk is in it get their marker in the same transaction."""
    finished = []
    for item in batch:
        remaining[item.content_id] -= 1
        if remaining[item.content_id] == 0:
            finished.append(item.content_id)
    rows = [
        Chunk(fingerprint=fingerprint, content_id=item.content_id, seq=item.chunk.seq,
              char_start=item.chunk.char_start, char_end=item.chunk.char_end,
              start_line=item.chunk.start_line, tokens=item.chunk.tokens, embedding=vector)
        for item, vector in zip(batch, vectors)
    ]
    with transaction.atomic():
        Chunk.objects.bulk_create(rows, ignore_conflicts=True)
        if finished:
            _mark_done(fingerprint, {c: stored.pop(c) for c in finished})
    for content_id in finished:
        remaining.pop(content_id, None)
    return finished


def _mark_done(fingerprint: EmbeddingFingerprint, counts: dict[str, int]) -> None:
    ContentEmbedding.objects.bulk_create(
        [ContentEmbedding(fingerprint=fingerprint, content_id=c, chunks=n) for c, n in counts.items()],
        ignore_conflicts=True,
    )


def _forget(fingerprint: EmbeddingFingerprint, collections: list[str] | None) -> None:
    """`pmd embed -f`: drop this fingerprint's vectors (for the chosen collections)."""
    scope = wanted_contents(collections=collections) if collections else None
    with transaction.atomic():
        markers = ContentEmbedding.objects.filter(fingerprint=fingerprint)
        chunks = Chunk.objects.filter(fingerprint=fingerprint)
        if scope is not None:
            markers, chunks = markers.filter(content__in=scope), chunks.filter(content__in=scope)
        markers.delete()
        chunks.delete()


def _drop_other_fingerprints(keep: EmbeddingFingerprint) -> list[str]:
    """Once the current fingerprint covers everything, older vectors are only dead weight."""
    dropped = []
    for other in EmbeddingFingerprint.objects.exclude(pk=keep.pk):
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(f'DROP INDEX IF EXISTS "{other.hnsw_index_name}"')
            ContentEmbedding.objects.filter(fingerprint=other).delete()
            Chunk.objects.filter(fingerprint=other).delete()
            other.delete()
        dropped.append(f"{other.model} ({other.dims}d)")
    return dropped


def hnsw_index_ensure(fingerprint: EmbeddingFingerprint) -> bool:
    """Create the fingerprint's HNSW index if it does not exist yet. True when built now."""
    if hnsw_index_exists(fingerprint) or not Chunk.objects.filter(fingerprint=fingerprint).exists():
        return False
    with connection.cursor() as cursor:
        # Building wants the graph in memory; the default 64MB makes pgvector fall back
        # to a much slower build from a few tens of thousands of vectors on.
        cursor.execute("SET maintenance_work_mem = '1GB'")
        cursor.execute("SET max_parallel_maintenance_workers = 2")
        if connection.in_atomic_block:
            # Django's foreign keys are deferred: inside a transaction (tests, callers
            # holding one) their pending checks must run before CREATE INDEX may.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")
        try:
            cursor.execute(
                f'CREATE INDEX IF NOT EXISTS "{fingerprint.hnsw_index_name}" ON indexing_chunk '
                f"USING hnsw ((embedding::vector({int(fingerprint.dims)})) vector_cosine_ops) "
                f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) "
                f"WHERE fingerprint_id = {int(fingerprint.pk)}"
            )
            cursor.execute("ANALYZE indexing_chunk")
        finally:
            cursor.execute("RESET maintenance_work_mem")
            cursor.execute("RESET max_parallel_maintenance_workers")
    return True


def hnsw_index_exists(fingerprint: EmbeddingFingerprint) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_indexes WHERE tablename = 'indexing_chunk' AND indexname = %s",
                       [fingerprint.hnsw_index_name])
        return cursor.fetchone() is not None


# --- the run lock and interrupted jobs ------------------------------------------------------------


def _try_lock() -> bool:
    # A session lock even inside a transaction: batches commit as they go, the run is what it guards.
    return advisory_lock_try(key=EMBEDDING, session=True)


def _unlock() -> None:
    advisory_lock_release(key=EMBEDDING, session=True)


def embedding_running() -> bool:
    """Is some process (here or elsewhere) inside `embed_pending` right now?"""
    return advisory_lock_taken(key=EMBEDDING)


def _mark_interrupted_jobs(current: Job | None) -> int:
    """Jobs left `running` by a worker that died: we hold the lock, so they are not running."""
    stale = Job.objects.filter(kind=Job.Kind.EMBED, state__in=[Job.State.RUNNING])
    if current is not None:
        stale = stale.exclude(pk=current.pk)
    return stale.update(state=Job.State.FAILED, finished_at=timezone.now(),
                        message="interrupted: the process stopped before finishing; the next run resumed it")


# --- status (read-only) ------------------------------------------------------------------------------


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
            chunks=Chunk.objects.filter(fingerprint=fingerprint).count(),
            hnsw_index=hnsw_index_exists(fingerprint),
        )
    status["mismatch"] = bool(status["stale_fingerprints"]) and (fingerprint is None or status["pending"] > 0)
    status["ok"] = not status["mismatch"]
    if status["mismatch"]:
        status["hint"] = (f"the index holds vectors of another model or chunking than {config.model}: "
                          "run `pmd embed` (vector search refuses to mix them)")
    elif status["pending"]:
        status["hint"] = f"{status['pending']} document(s) without embeddings: run `pmd embed`"
    job = Job.objects.filter(kind=Job.Kind.EMBED).order_by("-created_at").first()
    if job is not None:
        state = job.state
        if state == Job.State.RUNNING and not embedding_running():
            state = "interrupted"  # its process died; the next `pmd embed` resumes
        status["job"] = {"id": str(job.id), "state": state, "done": job.done, "total": job.total,
                         "percent": job.percent, "message": job.message,
                         "created_at": job.created_at.isoformat()}
    return status

