"""`pmd bench DATASET --mode vsearch` and `--mode vsearch-scale`.

vsearch: index the dataset, embed it through the real pipeline (chunking, batched
backend calls, database writes) and report throughput; replay a sample of the very
same batches straight against the backend to measure what the pipeline costs on
top; measure the HNSW index's recall@10 against exact search on the real query
vectors; then the usual retrieval metrics and latency through `vector_search`.

vsearch-scale: HNSW at 100k+ chunks. The dataset's chunk vectors are copied with
small random perturbations (in SQL, pgvector's `l2_normalize`) under a scratch
fingerprint until there are SCALE_TARGET of them, the HNSW index is built, and the
dataset's queries are run through the index and exactly. The scratch vectors are
deleted afterwards. Run `--mode vsearch` first (it needs the embeddings).
"""

from __future__ import annotations

import math
import random
import time

from django.conf import settings
from django.db import connection, transaction

from indexing.access import Access
from indexing.errors import BenchmarkError, LLMBackendError
from indexing.llm import embedding_prompts, get_backend
from indexing.models import Chunk, EmbeddingFingerprint
from indexing.services.embedding import (
    HNSW_EF_CONSTRUCTION,
    HNSW_M,
    embed_pending,
    embedding_config,
    fingerprint_configured,
    hnsw_index_drop,
    hnsw_index_ensure,
)
from pmd_site.bench.quality import (
    BenchOptions,
    BenchReport,
    _bench_collection,
    _dataset,
    bench_queries,
    bench_retrieval,
    percentile,
)
from search import Mode
from search.retrieval.common import collection_ids_for
from search.retrieval.vector import nearest_chunks, vector_search

# Models, services and retrieval are imported inside the functions: `pmd` imports this module
# (through pmd_site/bench/modes.py) while it builds its parser, before Django is set up.

REPLAY_BATCHES = 40  # batches replayed directly against the backend
RECALL_K = 10
SCALE_TARGET = 100_000
EF_SWEEP = (40, 100, 200, 400)


def _query_vectors(queries: list[tuple[str, str]]) -> list[list[float]]:
    config = embedding_config()
    prompts = embedding_prompts(config.model)
    backend = get_backend()
    vectors = []
    for start in range(0, len(queries), 32):
        texts = [prompts.format_query(text) for _, text in queries[start : start + 32]]
        vectors.extend(backend.embed(texts, model=config.model))
    return vectors


def _recall(
    fingerprint,
    vectors,
    *,
    collection_ids=None,
    k: int = RECALL_K,
    ef_search: int | None = None,
    truths: list[set] | None = None,
) -> dict:
    """Chunk-level recall@k of the HNSW scan against exact search, and both latencies."""
    recalls, index_ms, exact_ms = [], [], []
    for n, vector in enumerate(vectors):
        t0 = time.perf_counter()
        approximate = nearest_chunks(fingerprint, vector, k=k, collection_ids=collection_ids, ef_search=ef_search)
        index_ms.append((time.perf_counter() - t0) * 1000)
        if truths is not None and n < len(truths):
            truth = truths[n]
        else:
            t0 = time.perf_counter()
            exact = nearest_chunks(fingerprint, vector, k=k, collection_ids=collection_ids, exact=True)
            exact_ms.append((time.perf_counter() - t0) * 1000)
            truth = {(r[0], r[1]) for r in exact}
            if truths is not None:
                truths.append(truth)
        found = {(r[0], r[1]) for r in approximate}
        recalls.append(len(truth & found) / len(truth) if truth else 1.0)
    return {
        "recall": sum(recalls) / len(recalls) if recalls else 0.0,
        "index_p50": percentile(index_ms, 50),
        "index_p95": percentile(index_ms, 95),
        "exact_p50": percentile(exact_ms, 50),
        "exact_p95": percentile(exact_ms, 95),
    }


def bench_vsearch(dataset_dir: str, options: BenchOptions) -> BenchReport:
    root = _dataset(dataset_dir)
    collection, _ = _bench_collection(root, options, fresh=options.fresh)
    try:
        embedded = embed_pending(
            collections=[collection.name], force=options.fresh, record_batches=True, progress=options.progress
        )
    except LLMBackendError as exc:
        raise BenchmarkError(str(exc)) from None
    report = BenchReport(f"vsearch {root.name}")
    data: dict = {"embedding": embedded.as_dict()}
    report.lines.append(
        (
            "model",
            f"{embedded.model} ({embedded.dims}d), "
            f"{embedded.chunks and 'embedded now' or 'already embedded (--fresh re-embeds)'}",
        )
    )
    if embedded.chunks:
        batches = embedded.batch_texts or []
        step = max(1, len(batches) // REPLAY_BATCHES)
        sample = batches[::step][:REPLAY_BATCHES]
        backend = get_backend()
        t0 = time.perf_counter()
        for texts in sample:
            backend.embed(texts, model=embedded.model)
        direct_s = time.perf_counter() - t0
        direct_rate = sum(len(b) for b in sample) / direct_s
        # The backend is busy for embed_seconds of the run; the rest is what the pipeline
        # adds (chunking, database reads and writes not hidden behind a request in flight).
        overhead = embedded.elapsed / embedded.embed_seconds - 1 if embedded.embed_seconds else 0.0
        report.lines += [
            (
                "embedded",
                f"{embedded.chunks:,} chunks of {embedded.contents:,} documents in {embedded.elapsed:.1f} s "
                f"= {embedded.chunks_per_second:.1f} chunks/s ({embedded.batches} batches)",
            ),
            (
                "pipeline overhead",
                f"{overhead * 100:+.1f} % of wall time beyond the backend calls "
                f"({embedded.embed_seconds:.1f} s inside them)",
            ),
            (
                "direct backend calls",
                f"{direct_rate:.1f} chunks/s replaying {len(sample)} of the same batches "
                f"(pipeline {embedded.chunks_per_second:.1f}; a shared machine makes these two "
                "runs differ by load)",
            ),
        ]
        data.update(direct_chunks_per_second=direct_rate, pipeline_overhead=overhead)

    queries = bench_queries(root, options)
    fingerprint = fingerprint_configured()
    vectors = _query_vectors(queries)
    recall = _recall(fingerprint, vectors, collection_ids=collection_ids_for([collection.name], Access.local_user()))

    chunks = Chunk.objects.filter(fingerprint=fingerprint).count()
    report.lines += [
        (f"HNSW recall@{RECALL_K}", f"{recall['recall']:.4f} vs exact over {chunks:,} chunks ({len(vectors)} queries)"),
        (
            "nearest-chunk latency",
            f"HNSW p50 {recall['index_p50']:.1f} ms p95 {recall['index_p95']:.1f} ms; "
            f"exact p50 {recall['exact_p50']:.1f} ms p95 {recall['exact_p95']:.1f} ms",
        ),
    ]
    data["hnsw"] = {**recall, "chunks": chunks}

    stages: dict[str, list[float]] = {}
    current = {"pass": 1}

    def on_pass(number: int) -> None:
        current["pass"] = number

    def timed_search(request):
        response = vector_search(request)
        if current["pass"] == 2:  # the warm pass, like the latencies
            for stage, ms in response.timings.items():
                stages.setdefault(stage, []).append(ms)
        return response

    retrieval = bench_retrieval(dataset_dir, options, service_fn=timed_search, mode=Mode.VECTOR, on_pass=on_pass)
    report.lines += [line for line in retrieval.lines if line[0] != "documents"]
    report.lines.append(
        ("stages (p50, warm)", ", ".join(f"{stage} {percentile(ms, 50):.1f} ms" for stage, ms in stages.items()))
    )
    data["stages_p50_ms"] = {stage: percentile(ms, 50) for stage, ms in stages.items()}
    data.update(retrieval.data)
    report.data = data
    return report


def bench_vsearch_scale(dataset_dir: str, options: BenchOptions) -> BenchReport:
    root = _dataset(dataset_dir)
    source = fingerprint_configured()
    if source is None or not Chunk.objects.filter(fingerprint=source).exists():
        raise BenchmarkError(
            "nothing is embedded with the configured model: run `pmd bench DATASET --mode vsearch` first"
        )
    queries = bench_queries(root, options)[:100]
    vectors = _query_vectors(queries)
    real = Chunk.objects.filter(fingerprint=source).count()
    copies = max(1, math.ceil(SCALE_TARGET / real))
    dims = int(source.dims)
    scratch = EmbeddingFingerprint.objects.create(
        key=f"bench-scale-{random.getrandbits(40):010x}",
        model=f"{source.model} (bench-scale copies)",
        dims=dims,
        backend=source.backend,
        chunk_params=source.chunk_params,
        document_prompt="bench-scale",
    )
    try:
        # Each copy: the real vector plus uniform noise of norm ~0.3, re-normalised.
        spread = 0.3 / (0.2887 * math.sqrt(dims))
        t0 = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"""
                INSERT INTO indexing_chunk (fingerprint_id, content_hash, seq, char_start, char_end, start_line,
                                            tokens, embedding)
                SELECT %s, c.content_hash, c.seq * 1000 + g.n, c.char_start, c.char_end, c.start_line, c.tokens,
                       l2_normalize(c.embedding::vector({dims}) + (
                           SELECT array_agg((random() - 0.5) * %s)::vector({dims})
                           FROM generate_series(1, {dims}) WHERE g.n > 0))
                FROM indexing_chunk c CROSS JOIN generate_series(1, %s) AS g(n)
                WHERE c.fingerprint_id = %s
                """,
                [scratch.pk, spread, copies, source.pk],
            )
        load_s = time.perf_counter() - t0
        total = Chunk.objects.filter(fingerprint=scratch).count()
        t0 = time.perf_counter()
        hnsw_index_ensure(scratch)
        build_s = time.perf_counter() - t0
        truths: list[set] = []
        _recall(scratch, vectors, truths=truths)  # warms the index pages, records the exact answers
        sweep = {ef: _recall(scratch, vectors, ef_search=ef, truths=truths) for ef in EF_SWEEP}
        recall = _recall(scratch, vectors)
    finally:
        hnsw_index_drop(scratch)
        Chunk.objects.filter(fingerprint=scratch).delete()
        scratch.delete()
        if not connection.in_atomic_block:  # give the dead rows back, or exact scans pay for them
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE indexing_chunk")
    report = BenchReport(f"vsearch-scale {root.name}")
    report.lines += [
        (
            "vectors",
            f"{total:,} ({dims}d): {real:,} real chunk vectors × {copies} perturbed copies (loaded in {load_s:.1f} s)",
        ),
        ("HNSW build", f"{build_s:.1f} s (m={HNSW_M}, ef_construction={HNSW_EF_CONSTRUCTION})"),
        (
            f"HNSW recall@{RECALL_K}",
            f"{recall['recall']:.4f} vs exact ({len(vectors)} queries, "
            f"ef_search {settings.PMD_HNSW_EF_SEARCH} = PMD_HNSW_EF_SEARCH)",
        ),
        (
            "nearest-chunk latency",
            f"HNSW p50 {recall['index_p50']:.1f} ms p95 {recall['index_p95']:.1f} ms; "
            f"exact p50 {recall['exact_p50']:.1f} ms p95 {recall['exact_p95']:.1f} ms",
        ),
    ]
    for ef, result in sweep.items():
        report.lines.append(
            (
                f"  ef_search={ef}",
                f"recall@{RECALL_K} {result['recall']:.4f}, "
                f"p50 {result['index_p50']:.1f} ms p95 {result['index_p95']:.1f} ms",
            )
        )
    report.data = {
        "vectors": total,
        "dims": dims,
        "build_seconds": build_s,
        "load_seconds": load_s,
        "hnsw": recall,
        "ef_sweep": {str(ef): r for ef, r in sweep.items()},
    }
    return report
