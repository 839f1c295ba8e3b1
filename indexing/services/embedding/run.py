"""One embedding run: chunk pending contents, call the backend in batches, store vectors (see the package docstring)."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, InvalidStateError, wait
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from indexing.chunking import Chunk as TextChunk
from indexing.chunking import chunk_markdown
from indexing.errors import EmbeddingError, EmbeddingStopped, LLMBackendError
from indexing.llm import LLMBackend, get_backend
from indexing.markdown import searchable_text
from indexing.models import (
    Chunk,
    Commit,
    Content,
    ContentEmbedding,
    Document,
    EmbeddingFingerprint,
    Job,
)
from indexing.services.embedding.config import (
    EmbeddingConfig,
    embedding_config,
    fingerprint_ensure,
)
from indexing.services.embedding.hnsw import hnsw_index_drop, hnsw_index_ensure, hnsw_index_exists
from indexing.services.embedding.lock import (
    run_lock_release,
    run_lock_try,
    run_lock_wait,
)
from indexing.services.embedding.pending import (
    forget_pending_counts,
    pending_contents,
    wanted_contents,
)
from indexing.services.jobs import (
    JobProgress,
    job_fail,
    job_finish,
    job_start,
    job_wait,
    jobs_recover,
)

ProgressCallback = Callable[[int, int, str], None]
CONTENTS_PER_ROUND = 64  # contents loaded and chunked at a time
WAITING_FOR_RUN = "waiting for another embedding to finish"
STOPPED = (
    "stopped: the process embedding was shutting down; what it had not embedded stays pending "
    "and the next embedding run does it"
)
# Done when this process shuts down (a worker's SIGTERM): a run waiting for the model server stops at once.
_shutting_down: Future = Future()


def embedding_stop() -> None:
    """This process is shutting down: a run in progress abandons its batch in flight and ends now
    (a worker's warm shutdown otherwise waits for the model server, seconds per batch)."""
    if not _shutting_down.done():
        with contextlib.suppress(InvalidStateError):
            _shutting_down.set_result(None)


@dataclass
class EmbedReport:
    model: str = ""
    dims: int = 0
    fingerprint: str = ""
    contents: int = 0  # contents completed in this run
    chunks: int = 0  # chunks embedded in this run
    reused_chunks: int = 0  # chunks found already stored (resumed content)
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
    except LLMBackendError as exc:
        if job is not None:
            job_fail(job, message=str(exc))
        raise
    report = EmbedReport(
        model=fingerprint.model,
        dims=fingerprint.dims,
        fingerprint=fingerprint.key,
        batch_texts=[] if record_batches else None,
    )
    if not run_lock_try():
        # Another process embeds: this request waits its turn (queued, saying so), then embeds what
        # that run left: pending is derived once the lock is ours, so notes changed after the
        # other run began are not missed, and what it did is not done twice.
        if job is not None:
            job_wait(job, message=WAITING_FOR_RUN)
        if progress:
            progress(0, 0, WAITING_FOR_RUN)
        run_lock_wait()
        if job is not None and _finished_meanwhile(job):  # a duplicate delivery did it while we waited
            run_lock_release()
            return report
    try:
        report.interrupted_jobs = jobs_recover(exclude=job, embedding_run_held=True)
        if force:
            _forget(fingerprint, collections)
        pending = _notes_first(fingerprint, collections)
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
        run_lock_release()


def _notes_first(fingerprint: EmbeddingFingerprint, collections: list[str] | None) -> list[str]:
    """What is pending, the notes' content before the commits': semantic search over the notes
    works long before a large history is embedded."""
    notes = list(pending_contents(fingerprint, collections=collections, history=False))
    seen = set(notes)
    return notes + [c for c in pending_contents(fingerprint, collections=collections) if c not in seen]


def _finished_meanwhile(job: Job) -> bool:
    job.refresh_from_db(fields=["state"])
    return job.state == Job.State.DONE


def _run(
    config: EmbeddingConfig,
    fingerprint: EmbeddingFingerprint,
    backend: LLMBackend,
    pending: list[str],
    report: EmbedReport,
    tell: Callable[[int, str], None],
) -> None:
    """Chunk pending contents round by round; embed in batches with one request in flight
    while the previous batch is written."""
    queue: list[_Pending] = []
    remaining: dict[str, int] = {}  # content -> chunks still to store
    stored: dict[str, int] = {}  # content -> chunk count (for its marker)
    completed = 0
    in_flight: tuple[list[_Pending], Future] | None = None

    pool = _OneAtATime()
    interrupted = False
    try:

        def submit(batch: list[_Pending]):
            texts = [p.text for p in batch]
            if report.batch_texts is not None:
                report.batch_texts.append(texts)
            return batch, pool.submit(_timed_embed, backend, texts, config.model)

        def settle(flight) -> None:
            nonlocal completed
            batch, future = flight
            wait([future, _shutting_down], return_when=FIRST_COMPLETED)
            if not future.done():
                raise EmbeddingStopped(STOPPED)
            vectors, seconds = future.result()
            report.embed_seconds += seconds
            report.batches += 1
            for vector in vectors:
                if len(vector) != fingerprint.dims:
                    raise EmbeddingError(
                        f"model {fingerprint.model} returned {len(vector)}-dimensional vectors but reported "
                        f"{fingerprint.dims} dimensions: the server's copy looks broken or was replaced "
                        f"while embedding; pull it again, then embed again"
                    )
            finished = _store(fingerprint, batch, vectors, remaining, stored)
            report.chunks += len(batch)
            report.contents += len(finished)
            completed += len(finished)
            tell(completed, batch[-1].content_id[:12])

        for start in range(0, len(pending), CONTENTS_PER_ROUND):
            hashes = pending[start : start + CONTENTS_PER_ROUND]
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
                batch, queue = queue[: config.batch_size], queue[config.batch_size :]
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
    except (KeyboardInterrupt, EmbeddingStopped):
        interrupted = True  # Ctrl-C or shutdown: stop now; the batch in flight is not stored, nothing is lost
        raise
    finally:
        # On failure do not send the batch still queued behind the one that failed.
        pool.shutdown(wait=not interrupted)


class _OneAtATime:
    """Runs the embedding requests one at a time on a daemon thread: a ThreadPoolExecutor's
    thread is joined when the process exits, so Ctrl-C waited for the batch in flight (seconds
    of a model's work) before `pmd embed` ended."""

    def __init__(self):
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="pmd-embed")
        self._thread.start()

    def _serve(self) -> None:
        while (item := self._work.get()) is not None:
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
                future.set_exception(exc)

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        self._work.put((future, fn, args))
        return future

    def shutdown(self, *, wait: bool) -> None:
        """Cancel what has not started; with `wait`, let the request in flight end first."""
        while True:
            try:
                item = self._work.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        self._work.put(None)
        if wait:
            self._thread.join()


def _timed_embed(backend: LLMBackend, texts: list[str], model: str) -> tuple[list[list[float]], float]:
    began = time.perf_counter()
    vectors = backend.embed(texts, model=model)
    return vectors, time.perf_counter() - began


def _prepare(config: EmbeddingConfig, fingerprint: EmbeddingFingerprint, hashes: list[str]):
    """Chunk each content; yield (content, chunks still to embed, chunks already stored)."""
    bodies = dict(Content.objects.filter(pk__in=hashes).values_list("pk", "body"))
    titles: dict[str, str] = {}
    for content_id, title in (
        Document.objects.filter(content_id__in=hashes, active=True)
        .order_by("content_id", "id")
        .values_list("content_id", "title")
    ):
        titles.setdefault(content_id, title)
    if len(titles) < len(hashes):  # a commit's text: its title line
        for content_id, title in Commit.objects.filter(content_id__in=hashes).values_list("content_id", "title"):
            titles.setdefault(content_id, title)
    have: dict[str, set[int]] = {}
    for content_id, seq in Chunk.objects.filter(fingerprint=fingerprint, content_id__in=hashes).values_list(
        "content_id", "seq"
    ):
        have.setdefault(content_id, set()).add(seq)
    for content_id in hashes:
        body = bodies.get(content_id)
        if body is None:
            continue
        chunks = chunk_markdown(searchable_text(body), config.chunk_params)  # what the keyword index reads too
        done = have.get(content_id, set())
        title = titles.get(content_id, "")
        items = [
            _Pending(content_id, c, config.prompts.format_document(c.text.strip(), title=title))
            for c in chunks
            if c.seq not in done
        ]
        yield content_id, items, len(chunks) - len(items)


def _store(
    fingerprint: EmbeddingFingerprint,
    batch: list[_Pending],
    vectors: list[list[float]],
    remaining: dict[str, int],
    stored: dict[str, int],
) -> list[str]:
    """Write one batch; contents whose last chunk is in it get their marker in the same transaction."""
    finished = []
    for item in batch:
        remaining[item.content_id] -= 1
        if remaining[item.content_id] == 0:
            finished.append(item.content_id)
    rows = [
        Chunk(
            fingerprint=fingerprint,
            content_id=item.content_id,
            seq=item.chunk.seq,
            char_start=item.chunk.char_start,
            char_end=item.chunk.char_end,
            start_line=item.chunk.start_line,
            tokens=item.chunk.tokens,
            embedding=vector,
        )
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
            hnsw_index_drop(other)
            ContentEmbedding.objects.filter(fingerprint=other).delete()
            Chunk.objects.filter(fingerprint=other).delete()
            other.delete()
        dropped.append(f"{other.model} ({other.dims}d)")
    return dropped
