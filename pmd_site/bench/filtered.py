"""`pmd bench FOLDER --mode filtered [--docs 100000]`: filtered search at scale.

A synthetic vault of `--docs` notes is written to FOLDER/docs, the same for the same count (a fixed
seed): each note has frontmatter tags (a few common, many rare, some nested `project/pN`), a date
spread over 2020–2025, a `status` and an `author`, a path `AREA/YEAR/note-N.md`, and ~60 words
drawn from a Zipf-shaped vocabulary of made-up words. It is indexed by the normal indexing
service (collection_index), so the rows are exactly those of a real vault.

The vectors are synthetic too (nothing to embed 100k notes with on this machine): one chunk per
note, under a scratch fingerprint, drawn around 1,000 topic points (200 topics × 5 sub-topics) with
noise, l2-normalised; the HNSW index is built as `pmd embed` builds it. Queries are points drawn
the same way. They measure the index and the filter inside it, not a model's quality.

For each filter shape (broad to selective), QUERIES text queries and as many query vectors:
- keyword: the keyword search service with the filter (p50/p95 over every filtered query);
- vector: vector search from the query vector on (search_by_vector: the filter count, an exact
  scan when ≤ EXACT_FILTER_DOCUMENTS notes match, else HNSW with the filter inside the iterative
  scan, then the results); recall@10 of the HNSW scan (forced, whatever the count) against the
  exact filtered search, and of what the service returns.
The corpus, its index and the vectors are kept for the next run (`--fresh` rebuilds them).
"""

from __future__ import annotations

import json
import math
import random
import time
from datetime import date, timedelta
from pathlib import Path

from django.db import connection

from indexing.access import Access
from indexing.errors import BenchmarkError
from indexing.models import Chunk, EmbeddingFingerprint
from indexing.services.embedding import hnsw_index_drop, hnsw_index_ensure
from pmd_site.bench.quality import (
    BenchOptions,
    BenchReport,
    generated_corpus,
    made_up_words,
    percentile,
    zipf_cumulative,
)
from search import Mode, SearchRequest, search_run
from search.retrieval.common import collection_ids_for
from search.retrieval.filters import matching_count
from search.retrieval.vector import EXACT_FILTER_DOCUMENTS, nearest_chunks, search_by_vector

SEED = 15
DIMS = 384
TOPICS, SUBTOPICS = 200, 5
QUERIES = 20  # per filter shape
RECALL_K = 10
VOCABULARY = 20_000
WORDS_PER_NOTE = 60
AREAS = ["work", "home", "research", "meetings", "journal", "projects", "reading", "ops", "archive", "inbox"]
AUTHORS = [f"author{n}" for n in range(20)]
TAGS = 300  # tag-N, N = 0 most common (Zipf)
PROJECTS = 40  # nested tags project/pN on one note in ten
FIRST_DAY, DAYS = date(2020, 1, 1), 6 * 365
GENERATOR_VERSION = 1

# (label, filter text): from broad to selective; the shares are those of the generated corpus.
SHAPES = [
    ("no filter (reference)", ""),
    ("tag, common", "tag:tag-0"),
    ("tag, rare", "tag:tag-120"),
    ("nested tag (parent)", "tag:project"),
    ("path, one area", "path:research/**"),
    ("date, last half year", "after:2025-07"),
    ("field status:draft", "status:draft"),
    ("tag and date", "tag:tag-1 after:2025"),
    ("exclusion", "-tag:tag-0 -status:done"),
]


def _words(rng: random.Random) -> list[str]:
    return made_up_words(rng, VOCABULARY)


def corpus_write(folder: Path, docs: int, *, fresh: bool = False) -> bool:
    """FOLDER/docs holding the synthetic vault of `docs` notes (True when written now)."""
    marker = folder / "corpus.json"
    spec = {"docs": docs, "seed": SEED, "version": GENERATOR_VERSION}
    if not fresh and marker.is_file() and json.loads(marker.read_text()) == spec:
        return False
    rng = random.Random(SEED)
    vocabulary = _words(rng)
    word_weights = zipf_cumulative(VOCABULARY)
    tag_weights = zipf_cumulative(TAGS)
    root = folder / "docs"
    if root.exists():
        for old in sorted(root.rglob("*.md")):
            old.unlink()
    for n in range(docs):
        area = AREAS[n % len(AREAS)]
        day = FIRST_DAY + timedelta(days=rng.randrange(DAYS))
        tags = sorted({f"tag-{rng.choices(range(TAGS), cum_weights=tag_weights)[0]}" for _ in range(rng.randint(1, 3))})
        if rng.random() < 0.1:
            tags.append(f"project/p{rng.randrange(PROJECTS)}")
        status = rng.choices(["draft", "review", "done"], weights=[2, 2, 6])[0]
        words = rng.choices(vocabulary, cum_weights=word_weights, k=WORDS_PER_NOTE)
        title = " ".join(words[:3]).capitalize()
        text = (
            f"---\ntags: [{', '.join(tags)}]\ndate: {day.isoformat()}\nstatus: {status}\n"
            f"author: {rng.choice(AUTHORS)}\n---\n# {title}\n\n" + " ".join(words) + "\n"
        )
        target = root / area / str(day.year) / f"note-{n:06d}.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (folder / "queries.tsv").write_text("")  # the folder reads as a dataset; the queries are generated
    marker.write_text(json.dumps(spec))
    return True


def _text_queries(docs: int) -> list[str]:
    """Two or three words of the middle of the vocabulary (neither stop-word common nor unseen)."""
    rng = random.Random(SEED + 1)
    vocabulary = _words(random.Random(SEED))
    return [" ".join(rng.choice(vocabulary[50:2000]) for _ in range(rng.randint(2, 3))) for _ in range(QUERIES)]


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def _topic_points() -> list[list[float]]:
    rng = random.Random(SEED + 2)
    points = []
    for _ in range(TOPICS):
        topic = _unit([rng.gauss(0, 1) for _ in range(DIMS)])
        for _ in range(SUBTOPICS):
            points.append(_unit([t + 0.6 * rng.gauss(0, 1) / math.sqrt(DIMS) for t in topic]))
    return points


def _query_vectors(points: list[list[float]], count: int) -> list[list[float]]:
    rng = random.Random(SEED + 3)
    out = []
    for _ in range(count):
        center = rng.choice(points)
        out.append(_unit([c + 0.5 * rng.gauss(0, 1) / math.sqrt(DIMS) for c in center]))
    return out


def vectors_ensure(collection, *, fresh: bool):
    """The scratch fingerprint holding one synthetic vector per note of the collection, indexed."""
    key = f"bench-filtered-{collection.pk}"[:32]
    fingerprint = EmbeddingFingerprint.objects.filter(key=key).first()
    active = collection.documents.filter(active=True).values("content_id").distinct().count()
    if fingerprint and (fresh or Chunk.objects.filter(fingerprint=fingerprint).count() != active):
        hnsw_index_drop(fingerprint)
        fingerprint.delete()
        fingerprint = None
    if fingerprint is None:
        fingerprint = EmbeddingFingerprint.objects.create(
            key=key,
            model="synthetic (pmd bench --mode filtered)",
            dims=DIMS,
            backend="synthetic",
            chunk_params={"max_tokens": 0},
            document_prompt="bench-filtered",
        )
        points = _topic_points()
        literal = ";".join("[" + ",".join(f"{x:.6f}" for x in p) + "]" for p in points)
        # Noise per dimension uniform in ±spread: a norm of ~0.5 around a unit topic point.
        spread = 0.5 / (0.2887 * math.sqrt(DIMS))
        with connection.cursor() as cursor:
            cursor.execute("SELECT setseed(0.15)")
            cursor.execute(
                f"""
                WITH points AS (
                    SELECT (ordinality - 1)::int AS i, p::vector({DIMS}) AS v
                    FROM unnest(string_to_array(%s, ';')) WITH ORDINALITY AS t(p)
                ), contents AS (
                    SELECT DISTINCT d.content_hash FROM indexing_document d
                    WHERE d.collection_id = %s AND d.active ORDER BY d.content_hash
                )
                INSERT INTO indexing_chunk (fingerprint_id, content_hash, seq, char_start, char_end, start_line,
                                            tokens, embedding)
                SELECT %s, c.content_hash, 0, 0, 0, 1, 0,
                       l2_normalize(p.v + (SELECT array_agg((random() - 0.5) * %s)::vector({DIMS})
                                           FROM generate_series(1, {DIMS}) WHERE c.content_hash IS NOT NULL))
                FROM contents c
                JOIN points p ON p.i = abs(hashtext(c.content_hash)) %% {len(points)}
                """,
                [literal, collection.pk, fingerprint.pk, spread],
            )
    hnsw_index_ensure(fingerprint)
    return fingerprint


def bench_filtered(dataset_dir: str, options: BenchOptions) -> BenchReport:
    docs = int(options.docs or 100_000)
    if docs < 1000:
        raise BenchmarkError("--docs: at least 1000 notes")
    corpus = generated_corpus(dataset_dir, lambda folder, fresh: corpus_write(folder, docs, fresh=fresh), options)
    started = time.perf_counter()
    fingerprint = vectors_ensure(corpus.collection, fresh=options.fresh or corpus.written)
    vectors_s = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE indexing_document")

    bench = _FilteredSearches(corpus.collection, fingerprint, docs)
    report = BenchReport(f"filtered search, {bench.total:,} synthetic notes")
    report.lines.append(("corpus", _corpus_line(corpus, vectors_s)))
    keyword_ms: list[float] = []
    vector_ms: list[float] = []
    recalls_hnsw: list[float] = []
    recalls_service: list[float] = []
    shapes: dict = {}
    for label, written_filter in SHAPES:
        shape = bench.shape(written_filter)
        if shape.filters is not None:
            keyword_ms += shape.keyword_ms
            vector_ms += shape.vector_ms
            recalls_hnsw += shape.recalls_hnsw
            recalls_service += shape.recalls_service
        shapes[label] = shape.data(written_filter)
        report.lines.append((f"  {label}", shape.line(written_filter, bench.total)))
    hnsw_recall = sum(recalls_hnsw) / len(recalls_hnsw) if recalls_hnsw else 1.0
    service_recall = sum(recalls_service) / len(recalls_service) if recalls_service else 1.0
    report.lines += _summary_lines(keyword_ms, vector_ms, hnsw_recall, service_recall)
    report.data = {
        "documents": bench.total,
        "dims": DIMS,
        "queries_per_shape": QUERIES,
        "shapes": shapes,
        "keyword_p50_ms": percentile(keyword_ms, 50),
        "keyword_p95_ms": percentile(keyword_ms, 95),
        "vector_p50_ms": percentile(vector_ms, 50),
        "vector_p95_ms": percentile(vector_ms, 95),
        "hnsw_recall": hnsw_recall,
        "service_recall": service_recall,
    }
    return report


def _corpus_line(corpus, vectors_s: float) -> str:
    """Where the corpus is, and whether it was written and indexed now or kept."""
    return (
        f"{corpus.folder / 'docs'}: "
        + (f"written in {corpus.write_seconds:.0f} s, " if corpus.written else "kept, ")
        + (f"indexed in {corpus.index_seconds:.0f} s" if corpus.indexed_now else "index kept")
        + f"; {DIMS}d synthetic vectors ready in {vectors_s:.0f} s"
    )


class _FilteredSearches:
    """The bench's queries (texts and vectors) run on the synthetic collection, one filter shape at a time."""

    def __init__(self, collection, fingerprint, docs: int):
        self.collection = collection
        self.fingerprint = fingerprint
        self.access = Access.local_user()
        self.collection_ids = collection_ids_for([collection.name], self.access)
        self.texts = _text_queries(docs)
        self.vectors = _query_vectors(_topic_points(), QUERIES)
        self.total = collection.documents.filter(active=True).count()

    def shape(self, written_filter: str) -> _Shape:
        """Every query with this filter: keyword and vector latencies, and the recalls."""
        filters = self._filters(written_filter)
        matching = matching_count(filters, self.collection_ids, cap=10**9) if filters is not None else self.total
        shape = _Shape(filters, matching)
        for text, vector in zip(self.texts, self.vectors):
            shape.keyword_ms.append(self._keyword_ms(text, filters))
            ms, response = self._vector_search(text, vector, filters)
            shape.vector_ms.append(ms)
            self._recalls(shape, vector, filters, response)
        return shape

    def _filters(self, written_filter: str):
        """The filters as the search reads them from the query text (frontmatter keys looked up)."""
        return search_run(
            SearchRequest(
                query=f"{self.texts[0]} {written_filter}",
                mode=Mode.KEYWORD,
                access=self.access,
                collections=[self.collection.name],
                limit=1,
            )
        ).filters

    def _keyword_ms(self, text: str, filters) -> float:
        """The warm latency of a filtered keyword search (the first run warms)."""
        request = SearchRequest(
            query=text,
            mode=Mode.KEYWORD,
            access=self.access,
            collections=[self.collection.name],
            limit=10,
            filters=filters,
        )
        search_run(request)  # warm
        t0 = time.perf_counter()
        search_run(request)
        return (time.perf_counter() - t0) * 1000

    def _vector_search(self, text: str, vector: list[float], filters):
        """The warm latency of a filtered vector search from the query vector on, and its response."""
        request = SearchRequest(
            query=text,
            mode=Mode.VECTOR,
            access=self.access,
            collections=[self.collection.name],
            limit=10,
            filters=filters,
        )
        search_by_vector(request, vector, self.fingerprint, collection_ids=self.collection_ids)  # warm
        t0 = time.perf_counter()
        response = search_by_vector(request, vector, self.fingerprint, collection_ids=self.collection_ids)
        return (time.perf_counter() - t0) * 1000, response

    def _recalls(self, shape: _Shape, vector: list[float], filters, response) -> None:
        """Recall@RECALL_K against the exact filtered search: of the HNSW scan (forced) and of what
        the service returned."""
        truth = nearest_chunks(
            self.fingerprint, vector, k=RECALL_K, collection_ids=self.collection_ids, exact=True, filters=filters
        )
        exact = {r[7] for r in truth}
        shown = {r[7] for r in truth if r[5] <= 1}  # vector search shows no negative similarity
        hnsw = [
            r[7]
            for r in nearest_chunks(
                self.fingerprint, vector, k=40, collection_ids=self.collection_ids, exact=False, filters=filters
            )
        ][:RECALL_K]
        if exact:
            shape.recalls_hnsw.append(len(exact & set(hnsw)) / len(exact))
        if shown:
            shape.recalls_service.append(len(shown & {r.docid for r in response.results[:RECALL_K]}) / len(shown))


class _Shape:
    """What one filter shape measured."""

    def __init__(self, filters, matching: int):
        self.filters = filters
        self.matching = matching
        self.keyword_ms: list[float] = []
        self.vector_ms: list[float] = []
        self.recalls_hnsw: list[float] = []
        self.recalls_service: list[float] = []

    @property
    def plan(self) -> str:
        """How vector search runs with this filter."""
        if self.filters is None:
            return "HNSW"
        if self.matching <= EXACT_FILTER_DOCUMENTS:
            return "exact scan"
        return "HNSW, filter in the iterative scan"

    @property
    def hnsw_recall(self) -> float:
        return sum(self.recalls_hnsw) / len(self.recalls_hnsw) if self.recalls_hnsw else 1.0

    def data(self, written_filter: str) -> dict:
        return {
            "filter": written_filter,
            "matching": self.matching,
            "keyword_p50_ms": percentile(self.keyword_ms, 50),
            "vector_p50_ms": percentile(self.vector_ms, 50),
            "hnsw_recall": self.hnsw_recall,
            "vector_plan": self.plan,
        }

    def line(self, written_filter: str, total: int) -> str:
        share = self.matching / total if total else 0
        return (
            f"{written_filter!r}: {self.matching:,} notes ({share:.1%}); keyword p50 "
            f"{percentile(self.keyword_ms, 50):.1f} ms; vector p50 {percentile(self.vector_ms, 50):.1f} ms "
            f"({self.plan}); HNSW recall@{RECALL_K} {self.hnsw_recall:.3f}"
        )


def _summary_lines(
    keyword_ms: list[float], vector_ms: list[float], hnsw_recall: float, service_recall: float
) -> list[tuple[str, str]]:
    """The filtered queries over every shape (not the reference), against the goals."""
    count = len(keyword_ms)
    return [
        (
            "keyword, filtered",
            f"p50 {percentile(keyword_ms, 50):.1f} ms, p95 {percentile(keyword_ms, 95):.1f} ms "
            f"({count} queries, n=10, warm; goal p50 ≤ 50 ms)",
        ),
        (
            "vector, filtered",
            f"p50 {percentile(vector_ms, 50):.1f} ms, p95 {percentile(vector_ms, 95):.1f} ms "
            f"(from the query vector on: no embedding; goal p50 ≤ 50 ms)",
        ),
        (
            f"filtered HNSW recall@{RECALL_K}",
            f"{hnsw_recall:.4f} vs exact filtered search (HNSW forced for every "
            f"shape; goal ≥ 0.95); as the service runs it (exact when ≤ "
            f"{EXACT_FILTER_DOCUMENTS:,} match) {service_recall:.4f}",
        ),
    ]
