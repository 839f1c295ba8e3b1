"""`pmd bench --mode vector-scale [--size N]`: pgvector at a million chunks;
`pmd bench FOLDER --mode keyword-scale [--size N]`: pmd's BM25 index at a million passages.

No model can embed a million chunks on a small machine, so the vectors are synthetic, drawn to
look like sentence embeddings where HNSW cares: CLUSTERS topic centres of uneven popularity
(Zipf-shaped sizes, uneven spreads), every vector a centre plus anisotropic noise (variance
falling off along the dimensions like a real embedding's spectrum, so the data has a low
intrinsic dimension), a shared mean direction (real embeddings are not centred: all of
MiniLM's vectors lean one way), l2-normalised. The queries are drawn the same way from another
seed, so none of them is in the data. The ground truth is exact search computed with numpy
while the vectors are written (a few are checked against PostgreSQL's own sequential scan).

The vectors are written with COPY (binary) into a scratch table `bench_scale_vectors` (id,
collection = id % COLLECTIONS, embedding vector(384)) and kept with its indexes for the next
run of the same size (`--fresh` rebuilds). One HNSW index per storage, built as pmd builds its
own (m=16, ef_construction=128; maintenance_work_mem and max_parallel_maintenance_workers from
the environment variables PMD_BENCH_MAINTENANCE_WORK_MEM / PMD_BENCH_PARALLEL_WORKERS):

- vector:  `embedding vector_cosine_ops` (pmd's default, PMD_VECTOR_STORAGE=vector);
- halfvec: `(embedding::halfvec(384)) halfvec_cosine_ops` (PMD_VECTOR_STORAGE=halfvec): the
  index holds half-precision copies, the table keeps full precision;
- bit:     `(binary_quantize(embedding)::bit(384)) bit_hamming_ops`, the top k×R by Hamming
  distance re-ranked by the exact cosine distance of the full vectors (R = RESCORE factors);
- filtered: one collection of COLLECTIONS (a tenth of the chunks), through the vector index with
  pgvector's iterative scan, and through a partial index `WHERE collection = 3`.

Latency is per query, warm (a first pass over the queries warms the index pages), as the SQL
client sees it: nearest-chunk step only, not pmd's document join or snippets.

keyword-scale writes notes of SECTIONS headed sections (one passage each) of words drawn from a
Zipf-shaped made-up vocabulary into FOLDER/docs, indexes them with pmd's own indexing service
(the real keyword tables), and times keyword search (search_run, n=10) on 2–3 word queries.
"""

from __future__ import annotations

import json
import os
import random
import struct
import time
from pathlib import Path

from django.db import connection

from indexing.access import Access
from indexing.errors import BenchmarkError
from pmd_site.bench.quality import (
    BenchOptions,
    BenchReport,
    generated_corpus,
    made_up_words,
    percentile,
    zipf_cumulative,
)
from search import Mode, SearchRequest, search_run

SEED = 32
DIMS = 384
CLUSTERS = 3000
COLLECTIONS = 10
FILTER_COLLECTION = 3
QUERIES = 200
EXACT_CHECKS = 5  # queries also answered by PostgreSQL's sequential scan
K = 10
EF_SEARCH = (40, 100)
RESCORE = (4, 10, 40)  # binary quantization: re-rank the top K×R by the full vectors
BLOCK = 50_000  # vectors generated, written and scored at a time
HNSW_M, HNSW_EF_CONSTRUCTION = 16, 128  # as indexing/services/embedding/hnsw.py
TABLE = "bench_scale_vectors"
GENERATOR_VERSION = 1

STORAGES = {
    # name: (index expression and operator class, distance expression, query cast)
    "vector": ("embedding vector_cosine_ops", "embedding <=> %(q)s::vector({d})"),
    "halfvec": (
        f"(embedding::halfvec({DIMS})) halfvec_cosine_ops",
        f"embedding::halfvec({DIMS}) <=> %(q)s::halfvec({{d}})",
    ),
    "bit": (
        f"(binary_quantize(embedding)::bit({DIMS})) bit_hamming_ops",
        f"binary_quantize(embedding)::bit({DIMS}) <~> binary_quantize(%(q)s::vector({{d}}))",
    ),
}


def _numpy():
    try:
        import numpy  # noqa: PLC0415 - not a dependency: the local extra brings it
    except ImportError:  # pragma: no cover - the local extra brings it
        raise BenchmarkError("--mode vector-scale needs numpy (install pmd with the local extra)") from None
    return numpy


class _Generator:
    """Clustered unit vectors, deterministic for a seed (see the module docstring)."""

    def __init__(self, np):
        self.np = np
        rng = np.random.default_rng(SEED)
        # Spectrum: the noise's standard deviation along dimension i falls as (i+1)^-0.5.
        spectrum = (np.arange(DIMS) + 1.0) ** -0.5
        self.spectrum = (spectrum / np.sqrt((spectrum**2).sum())).astype(np.float32)
        mean = rng.standard_normal(DIMS).astype(np.float32)
        self.mean = mean / np.linalg.norm(mean)
        centres = rng.standard_normal((CLUSTERS, DIMS)).astype(np.float32) * self.spectrum[::-1] * 3
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        centres = centres + 0.6 * self.mean
        self.centres = centres / np.linalg.norm(centres, axis=1, keepdims=True)
        weights = 1.0 / (np.arange(CLUSTERS) + 10.0) ** 0.8  # popular and rare topics
        self.weights = weights / weights.sum()
        self.spreads = rng.lognormal(mean=np.log(0.7), sigma=0.25, size=CLUSTERS).astype(np.float32)

    def draw(self, rng, count: int):
        np = self.np
        which = rng.choice(CLUSTERS, size=count, p=self.weights)
        noise = rng.standard_normal((count, DIMS), dtype=np.float32) * self.spectrum
        out = self.centres[which] + noise * self.spreads[which, None]
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out.astype(np.float32)


def _copy_block(cursor, np, first_id: int, vectors) -> None:
    """One block through COPY ... (FORMAT BINARY): id int8, collection int4, embedding vector."""
    count = len(vectors)
    row = np.dtype(
        [
            ("fields", ">i2"),
            ("l_id", ">i4"),
            ("id", ">i8"),
            ("l_col", ">i4"),
            ("col", ">i4"),
            ("l_vec", ">i4"),
            ("dim", ">i2"),
            ("unused", ">i2"),
            ("v", ">f4", (DIMS,)),
        ]
    )
    rows = np.zeros(count, dtype=row)
    ids = np.arange(first_id, first_id + count, dtype=np.int64)
    rows["fields"], rows["l_id"], rows["id"] = 3, 8, ids
    rows["l_col"], rows["col"] = 4, ids % COLLECTIONS
    rows["l_vec"], rows["dim"], rows["v"] = 4 + 4 * DIMS, DIMS, vectors
    header = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
    with cursor.copy(f"COPY {TABLE} (id, collection, embedding) FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(header + rows.tobytes() + struct.pack(">h", -1))


def _top_merge(np, best_ids, best_scores, ids, scores, k: int):
    """Keep the k highest scores per query row across blocks."""
    all_scores = np.concatenate([best_scores, scores], axis=1)
    all_ids = np.concatenate([best_ids, ids], axis=1)
    keep = np.argpartition(-all_scores, k - 1, axis=1)[:, :k]
    return np.take_along_axis(all_ids, keep, axis=1), np.take_along_axis(all_scores, keep, axis=1)


class _Truth:
    """The exact top K of every query, overall and within FILTER_COLLECTION, block by block."""

    def __init__(self, np, queries):
        self.np, self.queries = np, queries
        empty = (np.full((len(queries), K), -1, dtype=np.int64), np.full((len(queries), K), -9.0, dtype=np.float32))
        self.best, self.best_filtered = empty, (empty[0].copy(), empty[1].copy())

    def add(self, first: int, block) -> None:
        np = self.np
        scores = self.queries @ block.T
        ids = np.broadcast_to(np.arange(first, first + len(block)), scores.shape)
        self.best = _top_merge(np, *self.best, ids, scores, K)
        mask = (np.arange(first, first + len(block)) % COLLECTIONS) == FILTER_COLLECTION
        self.best_filtered = _top_merge(np, *self.best_filtered, ids[:, mask], scores[:, mask], K)

    def sets(self) -> tuple[list[set], list[set]]:
        return (
            [{int(i) for i in row if i >= 0} for row in self.best[0]],
            [{int(i) for i in row if i >= 0} for row in self.best_filtered[0]],
        )


def _vectors(size: int, np):
    """(first id, block) for the `size` vectors, the same for the same size."""
    generator = _Generator(np)
    rng = np.random.default_rng(SEED + 1)
    for first in range(0, size, BLOCK):
        yield first, generator.draw(rng, min(BLOCK, size - first))


def _load(size: int, queries, np, *, write: bool, progress) -> tuple[float, list[set], list[set]]:
    """Write the vectors (unless kept) and score them against the queries: (seconds, truths)."""
    truth = _Truth(np, queries)
    started = time.perf_counter()
    with connection.cursor() as django_cursor:
        cursor = django_cursor.cursor  # psycopg's own cursor: COPY
        for first, block in _vectors(size, np):
            if write:
                _copy_block(cursor, np, first, block)
            truth.add(first, block)
            if progress:
                progress(min(size, first + BLOCK), size, "writing vectors" if write else "exact answers")
    return time.perf_counter() - started, *truth.sets()


def _truth_cached(queries: int) -> tuple[list[set], list[set]] | None:
    """The exact answers of a kept table, stored by an earlier run (drawing a million vectors
    again to score them costs minutes)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [f"{TABLE}_truth"])
        if cursor.fetchone()[0] is None:
            return None
        cursor.execute(f"SELECT answers FROM {TABLE}_truth WHERE queries = %s", [queries])
        row = cursor.fetchone()
    if row is None:
        return None
    answers = json.loads(row[0]) if isinstance(row[0], str) else row[0]
    return [set(a) for a in answers["all"]], [set(a) for a in answers["filtered"]]


def _truth_keep(queries: int, truth: list[set], truth_f: list[set]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {TABLE}_truth (queries int PRIMARY KEY, answers jsonb NOT NULL)")
        cursor.execute(
            f"INSERT INTO {TABLE}_truth VALUES (%s, %s) ON CONFLICT (queries) DO UPDATE SET answers = EXCLUDED.answers",
            [queries, json.dumps({"all": [sorted(t) for t in truth], "filtered": [sorted(t) for t in truth_f]})],
        )


def _spec(size: int) -> dict:
    return {"size": size, "seed": SEED, "dims": DIMS, "clusters": CLUSTERS, "version": GENERATOR_VERSION}


def _table_spec() -> dict | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT obj_description(to_regclass(%s), 'pg_class')", [TABLE])
        row = cursor.fetchone()
    try:
        return json.loads(row[0]) if row and row[0] else None
    except ValueError:
        return None


def _index_build(name: str, definition: str, where: str = "") -> float | None:
    """Seconds to build the index, None when it was kept from an earlier run."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_indexes WHERE tablename = %s AND indexname = %s", [TABLE, name])
        if cursor.fetchone():
            return None
        cursor.execute("SET maintenance_work_mem = %s", [os.environ.get("PMD_BENCH_MAINTENANCE_WORK_MEM", "1GB")])
        cursor.execute(
            f"SET max_parallel_maintenance_workers = {int(os.environ.get('PMD_BENCH_PARALLEL_WORKERS', '1'))}"
        )
        started = time.perf_counter()
        cursor.execute(
            f"CREATE INDEX {name} ON {TABLE} USING hnsw ({definition}) "
            f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) {where}"
        )
        built = time.perf_counter() - started
        cursor.execute("RESET maintenance_work_mem")
        cursor.execute("RESET max_parallel_maintenance_workers")
    return built


def _relation_mb(name: str) -> float:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_relation_size(%s)", [name])
        return cursor.fetchone()[0] / 2**20


def _literal(vector) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"


def _measure(sql: str, literals: list[str], truths: list[set], settings: dict[str, str]) -> dict:
    """Recall@K against the truths and warm p50/p95 of one query shape over every query."""
    with connection.cursor() as cursor:
        for name, value in settings.items():
            cursor.execute("SELECT set_config(%s, %s, false)", [name, value])
        try:
            for literal in literals:  # warm the index pages
                cursor.execute(sql, {"q": literal})
            times, recalls = [], []
            for literal, truth in zip(literals, truths):
                started = time.perf_counter()
                cursor.execute(sql, {"q": literal})
                found = {row[0] for row in cursor.fetchall()}
                times.append((time.perf_counter() - started) * 1000)
                recalls.append(len(found & truth) / len(truth) if truth else 1.0)
        finally:
            for name in settings:
                cursor.execute(f"RESET {name}")
    return {"recall": sum(recalls) / len(recalls), "p50_ms": percentile(times, 50), "p95_ms": percentile(times, 95)}


def bench_vector_scale(dataset_dir: str | None, options: BenchOptions) -> BenchReport:
    np = _numpy()
    size = int(options.size or 1_000_000)
    if size < 1000:
        raise BenchmarkError("--size: at least 1000 vectors")
    queries = _Generator(np).draw(np.random.default_rng(SEED + 2), int(options.limit or QUERIES))
    literals = [_literal(q) for q in queries]
    pgvector, shared_buffers = _server_settings()
    spec = _spec(size)
    kept = _table_kept(spec, fresh=options.fresh)
    load_s, truth, truth_f = _exact_answers(size, queries, np, kept=kept, progress=options.progress)
    if not kept:
        _table_described(spec)
    report = BenchReport(f"vector-scale, {size:,} synthetic {DIMS}d vectors")
    data: dict = {
        "size": size,
        "dims": DIMS,
        "pgvector": pgvector,
        "shared_buffers": shared_buffers,
        "table_mb": _relation_mb(TABLE),
        "load_seconds": load_s,
        "queries": len(queries),
        "storages": {},
    }
    report.lines.append(
        (
            "data",
            f"{CLUSTERS:,} clusters, anisotropic noise, {len(queries)} queries not in the data; "
            + (f"written by COPY in {load_s:.1f} s" if load_s is not None else "table kept")
            + f"; table {data['table_mb']:.0f} MB; pgvector {pgvector}, "
            f"shared_buffers {shared_buffers}",
        )
    )
    data["exact"] = _exact_check(report, literals, truth)
    report.lines.append(("storage, ef_search", f"{'build':>8} {'index':>9} {'recall@10':>9} {'p50':>8} {'p95':>8}"))
    hnsw = {"enable_seqscan": "off", "hnsw.iterative_scan": "off"}
    storages = options.storages or list(STORAGES)
    unknown = set(storages) - set(STORAGES) - {"filtered", "partial"}
    if unknown:
        raise BenchmarkError(f"--storage: {', '.join(sorted(unknown))}? (of {', '.join(STORAGES)}, filtered, partial)")
    for storage, (definition, distance) in STORAGES.items():
        if storage in storages:
            data["storages"][storage] = _storage_runs(report, storage, definition, distance, literals, truth, hnsw)

    report.data = data
    if {"filtered", "partial"} & set(storages) or not options.storages:
        _filtered(report, literals, truth_f, hnsw, partial="partial" in storages or not options.storages)
    report.lines.append(
        (
            "goal",
            f"p50 ≤ 10 ms and recall@{K} ≥ 0.98 at 1M; build times are blank when the "
            "index was kept from an earlier run (--fresh rebuilds)",
        )
    )
    return report


def _server_settings() -> tuple[str, str]:
    """The pgvector version and shared_buffers, which the report shows."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        pgvector = cursor.fetchone()[0]
        cursor.execute("SHOW shared_buffers")
        shared_buffers = cursor.fetchone()[0]
    return pgvector, shared_buffers


def _table_kept(spec: dict, *, fresh: bool) -> bool:
    """Whether the table of an earlier run holds the same vectors (and is kept); if not, it is
    created again, empty."""
    kept = not fresh and _table_spec() == spec
    with connection.cursor() as cursor:
        if not kept:
            cursor.execute(f"DROP TABLE IF EXISTS {TABLE}, {TABLE}_truth")
            cursor.execute(
                f"CREATE TABLE {TABLE} (id bigint NOT NULL, collection int NOT NULL, embedding vector({DIMS}) NOT NULL)"
            )
    return kept


def _exact_answers(size: int, queries, np, *, kept: bool, progress) -> tuple[float | None, list[set], list[set]]:
    """The seconds the vectors took to write (None when the table was kept) and the exact answers
    to the queries, without and with the filter: stored by an earlier run, or computed as the
    vectors are drawn (and written when the table is new), then stored."""
    cached = _truth_cached(len(queries)) if kept else None
    if cached:
        return None, *cached
    load_s, truth, truth_f = _load(size, queries, np, write=not kept, progress=progress)
    _truth_keep(len(queries), truth, truth_f)
    return (None if kept else load_s), truth, truth_f


def _table_described(spec: dict) -> None:
    """A new table: its spec in its comment (what the next run checks) and fresh statistics."""
    with connection.cursor() as cursor:
        cursor.execute(f"COMMENT ON TABLE {TABLE} IS %s", [json.dumps(spec)])
        cursor.execute(
            f"{'ANALYZE' if connection.in_atomic_block else 'VACUUM ANALYZE'} {TABLE}"
        )  # VACUUM: the visibility map, index-only reads


def _exact_check(report: BenchReport, literals: list[str], truth: list[set]) -> dict:
    """Exact search in PostgreSQL (a sequential scan) on a few queries: does the numpy truth agree?"""
    exact_sql = f"SELECT id FROM {TABLE} ORDER BY embedding <=> %(q)s::vector({DIMS}) LIMIT {K}"
    exact = _measure(
        exact_sql,
        literals[:EXACT_CHECKS],
        truth[:EXACT_CHECKS],
        {"enable_indexscan": "off", "enable_bitmapscan": "off", "max_parallel_workers_per_gather": "0"},
    )
    report.lines.append(
        (
            "exact (sequential scan)",
            f"p50 {exact['p50_ms']:.0f} ms; agrees with the numpy ground truth "
            f"on {exact['recall']:.3f} of the top {K} ({EXACT_CHECKS} queries)",
        )
    )
    return exact


def _storage_runs(
    report: BenchReport,
    storage: str,
    definition: str,
    distance: str,
    literals: list[str],
    truth: list[set],
    hnsw: dict,
) -> dict:
    """One storage's HNSW index (built unless kept) measured at each ef_search; for `bit`, at each
    re-rank depth, the candidates re-ranked by the full vectors."""
    name = f"{TABLE}_{storage}"
    built = _index_build(name, definition)
    size_mb = _relation_mb(name)
    entry: dict = {"build_seconds": built, "index_mb": size_mb, "runs": {}}
    distance = distance.format(d=DIMS)
    if storage == "bit":  # ef_search = the candidates taken, re-ranked by the full vectors
        for factor in RESCORE:
            sql = (
                f"SELECT id FROM (SELECT id, embedding FROM {TABLE} ORDER BY {distance} "
                f"LIMIT {K * factor}) candidates ORDER BY embedding <=> %(q)s::vector({DIMS}) LIMIT {K}"
            )
            label = f"ef {K * factor}, re-rank top {K * factor}"
            result = _measure(sql, literals, truth, {**hnsw, "hnsw.ef_search": str(K * factor)})
            entry["runs"][label] = result
            report.lines.append(_row(storage, label, built, size_mb, result))
    else:
        for ef in EF_SEARCH:
            sql = f"SELECT id FROM {TABLE} ORDER BY {distance} LIMIT {K}"
            result = _measure(sql, literals, truth, {**hnsw, "hnsw.ef_search": str(ef)})
            entry["runs"][f"ef {ef}"] = result
            report.lines.append(_row(storage, f"ef {ef}", built, size_mb, result))
    return entry


def _filtered(report: BenchReport, literals: list[str], truth_f: list[set], hnsw: dict, *, partial: bool) -> None:
    """One collection of COLLECTIONS: the full vector index with a filter, without and with the
    iterative scan (`collection + 0` keeps the partial index out), then a partial index."""
    filtered: dict = {}
    sql = (
        f"SELECT id FROM (SELECT id, embedding <=> %(q)s::vector({DIMS}) AS d FROM {TABLE} "
        f"WHERE collection + 0 = {FILTER_COLLECTION} ORDER BY d LIMIT {K}) s ORDER BY d"
    )
    for scan in ("off", "relaxed_order"):
        for ef in EF_SEARCH:
            label = f"filter, iterative scan {scan}, ef {ef}"
            result = _measure(sql, literals, truth_f, {**hnsw, "hnsw.iterative_scan": scan, "hnsw.ef_search": str(ef)})
            filtered[label] = result
            report.lines.append(_row("vector", label, None, None, result))
    report.data["filtered"] = filtered
    if not partial:
        return
    name = f"{TABLE}_collection{FILTER_COLLECTION}"
    built = _index_build(name, "embedding vector_cosine_ops", f"WHERE collection = {FILTER_COLLECTION}")
    size_mb = _relation_mb(name)
    partial_sql = (
        f"SELECT id FROM {TABLE} WHERE collection = {FILTER_COLLECTION} "
        f"ORDER BY embedding <=> %(q)s::vector({DIMS}) LIMIT {K}"
    )
    for ef in EF_SEARCH:
        label = f"filter, partial index, ef {ef}"
        result = _measure(partial_sql, literals, truth_f, {**hnsw, "hnsw.ef_search": str(ef)})
        filtered[label] = {**result, "build_seconds": built, "index_mb": size_mb}
        report.lines.append(_row("vector", label, built, size_mb, result))
    report.data["filtered"] = filtered


def _row(storage: str, label: str, built: float | None, size_mb: float | None, result: dict) -> tuple[str, str]:
    build = "" if built is None else f"{built:.0f} s"
    index = "" if size_mb is None else f"{size_mb:.0f} MB"
    return (
        f"  {storage}, {label}",
        f"{build:>8} {index:>9} {result['recall']:>9.4f} {result['p50_ms']:>6.1f}ms {result['p95_ms']:>6.1f}ms",
    )


# --- keyword-scale -----------------------------------------------------------------------------

SECTIONS = 10  # passages per note: a heading and ~WORDS_PER_SECTION words each
WORDS_PER_SECTION = 50
NOTES_PER_FOLDER = 1000
KEYWORD_VOCABULARY = 50_000
KEYWORD_TABLES = ("search_keyword_passage", "search_keyword_posting", "search_keyword_term")


def keyword_corpus_write(folder, passages: int, *, fresh: bool = False) -> bool:
    """FOLDER/docs: notes of SECTIONS sections (one passage each) of Zipf-drawn made-up words,
    `passages` in all, the same for the same count. True when written now."""
    folder = Path(folder)
    marker = folder / "corpus.json"
    spec = {"passages": passages, "seed": SEED, "sections": SECTIONS, "version": GENERATOR_VERSION}
    if not fresh and marker.is_file() and json.loads(marker.read_text()) == spec:
        return False
    rng = random.Random(SEED)
    vocabulary = made_up_words(rng, KEYWORD_VOCABULARY)
    weights = zipf_cumulative(KEYWORD_VOCABULARY)
    root = folder / "docs"
    if root.exists():
        for old in sorted(root.rglob("*.md")):
            old.unlink()
    for n in range(-(-passages // SECTIONS)):
        parts = []
        for _ in range(SECTIONS):
            words = rng.choices(vocabulary, cum_weights=weights, k=WORDS_PER_SECTION + 3)
            parts.append(f"## {' '.join(words[:3]).capitalize()}\n\n{' '.join(words[3:])}\n")
        target = root / f"part-{n // NOTES_PER_FOLDER:04d}" / f"note-{n:07d}.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"# Note {n}\n\n" + "\n".join(parts))
    (folder / "queries.tsv").write_text("")  # the folder reads as a dataset; the queries are generated
    marker.write_text(json.dumps(spec))
    return True


def bench_keyword_scale(dataset_dir: str, options: BenchOptions) -> BenchReport:
    """`pmd bench FOLDER --mode keyword-scale --size N`: N passages indexed by pmd's own indexing
    (collection_index: the real BM25 tables), then keyword search n=10 through search_run, warm."""
    passages = int(options.size or 1_000_000)
    if passages < 1000:
        raise BenchmarkError("--size: at least 1000 passages")
    corpus = generated_corpus(
        dataset_dir, lambda folder, fresh: keyword_corpus_write(folder, passages, fresh=fresh), options
    )
    folder, collection, written, indexed_now = corpus.folder, corpus.collection, corpus.written, corpus.indexed_now
    write_s, index_s = corpus.write_seconds, corpus.index_seconds
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM search_keyword_passage WHERE collection_id = %s", [collection.pk])
        stored = cursor.fetchone()[0]
        sizes = {}
        for table in KEYWORD_TABLES:
            cursor.execute("SELECT pg_total_relation_size(%s)", [table])
            sizes[table] = cursor.fetchone()[0] / 2**20
    rng = random.Random(SEED + 5)
    vocabulary = made_up_words(random.Random(SEED), KEYWORD_VOCABULARY)
    texts = [
        " ".join(rng.choice(vocabulary[50:5000]) for _ in range(rng.randint(2, 3)))
        for _ in range(int(options.limit or QUERIES))
    ]
    access = Access.local_user()
    times: list[float] = []
    for timed in (False, True):  # a first pass warms the buffers
        for text in texts:
            request = SearchRequest(
                query=text, mode=Mode.KEYWORD, access=access, collections=[collection.name], limit=10
            )
            t0 = time.perf_counter()
            search_run(request)
            if timed:
                times.append((time.perf_counter() - t0) * 1000)
    report = BenchReport(f"keyword-scale, {stored:,} passages")
    report.lines += [
        (
            "corpus",
            f"{folder / 'docs'}: {-(-passages // SECTIONS):,} notes of {SECTIONS} sections of "
            f"~{WORDS_PER_SECTION} Zipf-drawn words ({KEYWORD_VOCABULARY:,} made-up words); "
            + (f"written in {write_s:.0f} s, " if written else "kept, ")
            + (f"indexed in {index_s:.0f} s" if indexed_now else "index kept (--fresh rebuilds)"),
        ),
        (
            "keyword index",
            ", ".join(f"{table.removeprefix('search_keyword_')} {mb:.0f} MB" for table, mb in sizes.items())
            + " (all collections of this index, with their btrees)",
        ),
        (
            "keyword search, n=10",
            f"p50 {percentile(times, 50):.1f} ms, p95 {percentile(times, 95):.1f} ms "
            f"({len(texts)} queries of 2–3 words, warm; goal p50 ≤ 50 ms at 1M)",
        ),
    ]
    report.data = {
        "passages": stored,
        "notes": -(-passages // SECTIONS),
        "index_seconds": index_s if indexed_now else None,
        "write_seconds": write_s if written else None,
        "sizes_mb": sizes,
        "p50_ms": percentile(times, 50),
        "p95_ms": percentile(times, 95),
        "queries": len(texts),
    }
    return report
