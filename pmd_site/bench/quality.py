"""`pmd bench`: retrieval quality and speed on a test collection, and indexing throughput.

A dataset folder holds `docs/**/*.md` (sub-folders allowed), `queries.tsv` (query_id<TAB>text)
and `qrels.tsv` (query_id<TAB>doc_id<TAB>grade). Doc ids follow ../shared/datasets/eval.py on both
sides: the file name without its folder and without `.md` (`docs/vol-03/notebook-0123.md` and
`notebook-0123` are both `notebook-0123`), so file names must be unique. docs/ may hold PDFs and
the other formats pmd reads (their collection reads them); a doc id may name a page
(`paper.pdf#page=3`, a slide or a sheet likewise): when qrels.tsv names pages, a result's id is
its file's name and the page of its best match. The metric code
is ours (cross-checked against ../shared/datasets/eval.py): nDCG@10 with graded gains and
a log2(rank+1) discount, Recall@10, Recall@100 and MRR@10, averaged over every query
that has a relevant document (a query without results scores 0).

`--split odd|even|all` restricts a run to half of the queries, by 1-based position in
queries.tsv: odd = the 1st, 3rd, 5th… line, even = the 2nd, 4th…; fit constants on one half and
report the other. Latencies are timed on a second pass over the queries: the first pass (n=100,
the run that is scored) warms the query-embedding cache and the database buffers.

The modes `pmd bench` offers are a registry in pmd_site/bench/modes.py (`MODES[name] =
function(dataset_dir, options) -> BenchReport`); retrieval modes are `retrieval_mode(service_fn,
mode)`. This module holds the shared parts (datasets, metrics, the retrieval loop) that
pmd_site/bench/vector.py builds on, so neither imports the other both ways.
"""

from __future__ import annotations

import math
import os
import resource
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from django.contrib.auth import get_user_model

from indexing.errors import BenchmarkError
from search import Mode, SearchRequest, mode_verb

# Models, services and the search code are imported inside the functions: `pmd` imports this
# module (through pmd_site/bench/modes.py) while it builds its parser, and pmd_site/bench/loadtest.py
# imports it as a script, both before Django is set up.

DEPTH = 100  # results fetched per query: enough for Recall@100
SPLITS = ("all", "odd", "even")
SPLIT_RULE = "1-based position in queries.tsv: odd = 1st, 3rd, 5th…; even = 2nd, 4th, 6th…"


@dataclass
class BenchOptions:
    collection: str | None = None  # default: bench-<dataset folder name>
    fresh: bool = False  # drop and re-index the collection first
    run_file: str | None = None
    limit: int | None = None  # only the first N queries (of the split)
    split: str = "all"  # "odd" / "even": every other query of queries.tsv (SPLIT_RULE)
    progress: Callable | None = None
    as_user: str | None = None  # search as this member (access control on), not as the local user
    commits: int | None = None  # --mode history: index the newest N commits (default PMD_HISTORY_MAX_COMMITS)
    docs: int | None = None  # --mode filtered: notes in the synthetic vault (default 100,000)
    size: int | None = None  # --mode vector-scale: synthetic vectors (default 1,000,000)
    storages: list[str] | None = None  # --mode vector-scale: which indexes (default all, and filtered)
    language: str | None = None  # language of a new bench collection (default PMD_LANGUAGE: auto)


@dataclass
class BenchReport:
    title: str
    lines: list[tuple[str, str]] = field(default_factory=list)  # (label, value) printed in order
    data: dict = field(default_factory=dict)


def _access_factory(options: BenchOptions, collection) -> Callable:
    """Who the benchmark searches as: the local user, or (`--as USER`) a member, with a fresh
    Access per query, so the visibility lookup every real request makes is in the latency."""
    from indexing.access import Access, visible_collections

    if options.as_user is None:
        return Access.local_user
    user_model = get_user_model()
    user = user_model.objects.filter(**{user_model.USERNAME_FIELD: options.as_user}).first()
    if user is None:
        raise BenchmarkError(f"no user named '{options.as_user}'")
    if not visible_collections(Access.for_user(user)).filter(pk=collection.pk).exists():
        raise BenchmarkError(
            f"{options.as_user} cannot see collection {collection.name}: share it with them first "
            f"(pmd collection share {collection.name} --user {options.as_user})"
        )
    return lambda: Access.for_user(user)


# --- metrics ---------------------------------------------------------------------------


def ndcg_at(ranked: list[str], grades: dict[str, int], k: int = 10) -> float:
    dcg = sum(grades.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if grades.get(d, 0) > 0)
    ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], grades: dict[str, int], k: int) -> float:
    relevant = {d for d, g in grades.items() if g > 0}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def mrr_at(ranked: list[str], grades: dict[str, int], k: int = 10) -> float:
    for i, d in enumerate(ranked[:k]):
        if grades.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def evaluate(run: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    """Mean metrics over the qrels queries with a relevant document; duplicates count once."""
    totals = {"nDCG@10": 0.0, "Recall@10": 0.0, "Recall@100": 0.0, "MRR@10": 0.0}
    queries = [q for q, grades in qrels.items() if any(g > 0 for g in grades.values())]
    for q in queries:
        ranked = list(dict.fromkeys(run.get(q, [])))
        grades = qrels[q]
        totals["nDCG@10"] += ndcg_at(ranked, grades)
        totals["Recall@10"] += recall_at(ranked, grades, 10)
        totals["Recall@100"] += recall_at(ranked, grades, 100)
        totals["MRR@10"] += mrr_at(ranked, grades)
    return {k: (v / len(queries) if queries else 0.0) for k, v in totals.items()}


def known_rank(ranked: list[str], grades: dict[str, int]) -> int | None:
    """1-based rank of the first relevant document (None: not in the run)."""
    for i, d in enumerate(ranked):
        if grades.get(d, 0) > 0:
            return i + 1
    return None


def read_groups(path: Path) -> dict[str, list[str]]:
    """query_groups.tsv: query_id<TAB>group<TAB>group…  (e.g. language and kind of query)."""
    if not path.is_file():
        return {}
    groups = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        cols = [c.strip() for c in line.split("\t")]
        if len(cols) >= 2 and cols[0]:
            groups[cols[0]] = [c for c in cols[1:] if c]
    return groups


def evaluate_groups(
    run: dict[str, list[str]], qrels: dict[str, dict[str, int]], groups: dict[str, list[str]]
) -> dict[str, dict]:
    """Metrics for each group of queries, with the ranks of the known items (the first relevant)."""
    members: dict[str, list[str]] = {}
    for qid in qrels:
        for group in groups.get(qid, []):
            members.setdefault(group, []).append(qid)
    out = {}
    for group, qids in sorted(members.items()):
        metrics = evaluate(run, {q: qrels[q] for q in qids})
        ranks = [known_rank(list(dict.fromkeys(run.get(q, []))), qrels[q]) for q in qids]
        found = sorted(r for r in ranks if r is not None)
        metrics.update(
            queries=len(qids),
            top1=sum(r == 1 for r in found),
            top10=sum(r <= 10 for r in found),
            missing=len(ranks) - len(found),
            median_rank=statistics.median(found) if found else None,
            ranks=dict(zip(qids, ranks)),
        )
        out[group] = metrics
    return out


def made_up_words(rng, count: int) -> list[str]:
    """`count` unique made-up words (consonant-vowel syllables) in a fixed order for the rng's seed:
    the synthetic corpora's vocabulary (no real language's stemming or stop words apply)."""
    consonants, vowels = "bcdfghklmnprstvz", "aeiou"
    out: dict[str, None] = {}
    while len(out) < count:
        word = "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(2, 4)))
        out[word] = None
    return list(out)


def zipf_cumulative(n: int) -> list[float]:
    """Cumulative Zipf weights of ranks 1..n, for random.choices(cum_weights=...)."""
    total, cumulative = 0.0, []
    for rank in range(1, n + 1):
        total += 1 / rank
        cumulative.append(total)
    return cumulative


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


# --- datasets --------------------------------------------------------------------------


def doc_id_of(path: str) -> str:
    """The dataset doc id of a path: file name without folder and `.md` (eval.py's rule)."""
    name = os.path.basename(path.strip().replace("\\", "/"))
    return name[:-3] if name.endswith(".md") else name


def result_doc_id(result, *, per_page: bool) -> str:
    """A result's dataset doc id: its file's, and with `per_page` the page (slide, sheet) of its match."""
    doc_id = doc_id_of(result.path)
    return f"{doc_id}#{result.anchor}" if per_page and result.anchor else doc_id


def docs_formats(docs: Path) -> list[str]:
    """The formats other than markdown among a dataset's docs (for its collection's mask)."""
    from indexing.convert import format_of

    return sorted({format_of(p.name) for p in docs.rglob("*") if p.is_file()} - {"markdown"})


def split_queries(queries: list, split: str) -> list:
    """The queries of one half by 1-based position (odd = 1st, 3rd…), or all of them."""
    if split == "all":
        return list(queries)
    if split == "odd":
        return list(queries[0::2])
    if split == "even":
        return list(queries[1::2])
    raise BenchmarkError(f"unknown split {split!r}: use one of {', '.join(SPLITS)}")


def bench_queries(root: Path, options: BenchOptions) -> list[tuple[str, str]]:
    """queries.tsv, restricted to options.split, then to the first options.limit of those."""
    queries = split_queries(read_queries(root / "queries.tsv"), options.split)
    if options.limit:
        queries = queries[: options.limit]
    return queries


def split_label(split: str, count: int, total: int) -> str:
    if split == "all":
        return f"all ({count} of {total} queries)"
    return f"{split} ({count} of {total} queries; {SPLIT_RULE})"


def read_queries(path: Path) -> list[tuple[str, str]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and "\t" in line:
            qid, text = line.split("\t", 1)
            out.append((qid.strip(), text.strip()))
    return out


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        cols = line.split()
        if len(cols) == 4:
            cols = [cols[0], cols[2], cols[3]]
        if len(cols) != 3:
            continue
        try:
            grade = int(float(cols[2]))
        except ValueError:
            continue  # header
        qrels.setdefault(cols[0], {})[doc_id_of(cols[1])] = grade
    return qrels


# Datasets kept in a checkout (not in the package), usable by name (`tldr-multi`) from one.
BUILT_IN = Path(__file__).resolve().parents[2] / "scripts" / "bench" / "data"


def _dataset(dataset_dir: str) -> Path:
    root = Path(dataset_dir).expanduser().resolve()
    if not root.is_dir() and (BUILT_IN / dataset_dir).is_dir():
        root = BUILT_IN / dataset_dir
    if not (root / "docs").is_dir():
        raise BenchmarkError(f"{root} has no docs/ folder (expected docs/**/*.md, queries.tsv, qrels.tsv)")
    return root


@dataclass
class GeneratedCorpus:
    """A generated corpus in a bench folder, indexed as the bench collection."""

    folder: Path
    collection: object
    scan: object  # the scan report, None when the index was kept
    written: bool  # the corpus was (re)written now
    write_seconds: float
    index_seconds: float

    @property
    def indexed_now(self) -> bool:
        return bool(self.scan and (self.scan.added or self.scan.updated))


def generated_corpus(dataset_dir: str, write, options: BenchOptions) -> GeneratedCorpus:
    """`write(folder, fresh=…)` writes FOLDER/docs unless it holds the same corpus already (True when
    written); the folder is then indexed (again when written or --fresh). Both steps timed."""
    folder = Path(dataset_dir).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    written = write(folder, fresh=options.fresh)
    write_seconds = time.perf_counter() - started
    started = time.perf_counter()
    collection, scan = _bench_collection(folder, options, fresh=options.fresh or written)
    return GeneratedCorpus(folder, collection, scan, written, write_seconds, time.perf_counter() - started)


def _bench_collection(root: Path, options: BenchOptions, *, fresh: bool):
    """The throwaway collection over DATASET/docs: (collection, scan report or None)."""
    from indexing.keyword import keyword_index_maintain
    from indexing.models import Collection
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    name = options.collection or f"bench-{root.name}"
    existing = Collection.objects.filter(name=name).first()
    if existing and (fresh or existing.root_path != str(root / "docs")):
        existing.delete()
        existing = None
    formats = docs_formats(root / "docs") or None  # a markdown dataset: the default mask, as before
    collection = existing or collection_create(
        path=root / "docs", name=name, language=options.language, formats=formats
    )
    report = collection_index(collection, progress=options.progress)
    keyword_index_maintain()
    return collection, report


# --- modes -----------------------------------------------------------------------------


def bench_index(dataset_dir: str, options: BenchOptions) -> BenchReport:
    """First index of the docs folder (from scratch), then an unchanged re-index."""
    from indexing.services.scanning import collection_index

    root = _dataset(dataset_dir)
    started = time.perf_counter()
    collection, first = _bench_collection(root, options, fresh=True)
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    again = collection_index(collection)
    again_s = time.perf_counter() - started
    docs = first.added + first.updated
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    report = BenchReport(f"index {root.name}")
    report.lines += [
        ("documents", f"{docs:,}"),
        ("first index", f"{first_s:.2f} s  ({docs / first_s:,.0f} docs/s)"),
        ("unchanged re-index", f"{again_s:.2f} s  ({again.unchanged / again_s:,.0f} docs/s)"),
        ("peak memory (ru_maxrss)", f"{peak_mb:,.0f} MB"),
    ]
    report.data = {
        "documents": docs,
        "first_seconds": first_s,
        "unchanged_seconds": again_s,
        "first_docs_per_second": docs / first_s,
        "unchanged_docs_per_second": again.unchanged / again_s,
        "peak_rss_mb": peak_mb,
    }
    return report


def retrieval_mode(service_fn: Callable, mode: str, **request_options) -> Callable:
    """A bench mode that runs every query through `service_fn(SearchRequest)`."""

    def run(dataset_dir: str, options: BenchOptions) -> BenchReport:
        return bench_retrieval(dataset_dir, options, service_fn=service_fn, mode=mode, **request_options)

    return run


def bench_retrieval(
    dataset_dir: str,
    options: BenchOptions,
    *,
    service_fn: Callable,
    mode: str,
    on_pass: Callable[[int], None] | None = None,
    rewrite: Callable | None = None,
    timed: bool = True,
    **request_options,
) -> BenchReport:
    """Two passes over the queries. Pass 1: each query at n=DEPTH; this is the run that is
    scored, and it warms the query-embedding cache and the database buffers. Pass 2: each query
    at n=10 and at n=DEPTH, timed: the latencies reported. `on_pass(1 | 2)` is called before each
    pass so a mode can keep per-stage timings of the warm pass only. `rewrite(queries, collection)`
    changes the queries' texts once the collection is indexed (`--typos`); `timed=False` skips pass 2."""
    root, total_queries, queries, qrels, per_page = _judged_queries(dataset_dir, options)
    index_started = time.perf_counter()
    collection, scan = _bench_collection(root, options, fresh=options.fresh)
    index_s = time.perf_counter() - index_started

    searcher = _QuerySearcher(service_fn, mode, collection, _access_factory(options, collection), request_options)
    if rewrite is not None:
        queries = rewrite(queries, collection)

    started = time.perf_counter()
    if on_pass:
        on_pass(1)
    run, first_ms = searcher.scored_pass(queries, per_page, options.progress)
    if on_pass:
        on_pass(2)
    top_ms, deep_ms = searcher.timed_pass(queries if timed else [], options.progress, done=len(queries))
    total_s = time.perf_counter() - started
    if options.run_file:
        _write_run_file(options.run_file, queries, run)
    judged = {q: qrels[q] for q, _ in queries if q in qrels}
    metrics = evaluate(run, judged)
    title = f"{mode_verb(mode)} {root.name}" + ("" if options.split == "all" else f", {options.split} queries")
    report = BenchReport(title)
    docs = scan.files_seen if scan else 0
    report.lines.append(("documents", _documents_line(docs, collection, index_s)))
    report.lines.append(("split", split_label(options.split, len(queries), total_queries)))
    report.lines.append(("queries", f"{len(queries)} ({len(judged)} judged)"))
    report.lines += [(key, f"{value:.4f}") for key, value in metrics.items()]
    latency = _latencies(first_ms, top_ms, deep_ms)
    groups = evaluate_groups(run, judged, read_groups(root / "query_groups.tsv"))
    report.lines += _group_lines(groups)
    report.lines += _latency_lines(latency)
    report.lines.append(("total", _total_line(total_s, len(queries), first_ms + top_ms + deep_ms)))
    if options.run_file:
        report.lines.append(("run written", options.run_file))
    report.data = {
        "metrics": metrics,
        "latency_ms": latency,
        "latency_method": "second pass over the queries; the first (n=100) warmed the query-vector cache",
        "split": {"name": options.split, "queries": len(queries), "of": total_queries, "rule": SPLIT_RULE},
        "documents": docs,
        "queries": len(queries),
        "judged": len(judged),
        "groups": groups,
    }
    return report


def _documents_line(docs: int, collection, index_s: float) -> str:
    return (
        f"{docs:,} (collection {collection.name}, index/refresh {index_s:.1f} s, "
        f"text search configuration {collection.text_search_config})"
    )


def _total_line(total_s: float, queries: int, all_ms: list[float]) -> str:
    """The wall time of both passes: three service calls per query."""
    return f"{total_s:.1f} s for {3 * queries} service calls (mean {statistics.fmean(all_ms):.1f} ms)"


def _judged_queries(
    dataset_dir: str, options: BenchOptions
) -> tuple[Path, int, list[tuple[str, str]], dict[str, dict[str, int]], bool]:
    """The dataset folder, its number of queries, the queries of the split, the judgements, and
    whether they judge pages (`paper.pdf#page=3`) rather than files."""
    root = _dataset(dataset_dir)
    for needed in ("queries.tsv", "qrels.tsv"):
        if not (root / needed).is_file():
            raise BenchmarkError(f"{root} has no {needed}")
    total_queries = len(read_queries(root / "queries.tsv"))
    queries = bench_queries(root, options)
    qrels = read_qrels(root / "qrels.tsv")
    per_page = any("#" in doc_id for grades in qrels.values() for doc_id in grades)
    if not queries:
        raise BenchmarkError(f"{root / 'queries.tsv'} has no queries (split {options.split})")
    return root, total_queries, queries, qrels, per_page


class _QuerySearcher:
    """Runs the bench's queries through the service, on the bench collection, as the bench's user."""

    def __init__(self, service_fn: Callable, mode: str, collection, access_for: Callable, request_options: dict):
        self.service_fn = service_fn
        self.mode = mode
        self.collection = collection
        self.access_for = access_for
        self.request_options = request_options

    def call(self, text: str, limit: int):
        """The response to one query, and how long the service took (ms)."""
        request = SearchRequest(
            query=text,
            mode=self.mode,
            limit=limit,
            collections=[self.collection.name],
            access=self.access_for(),
            **self.request_options,
        )
        t0 = time.perf_counter()
        response = self.service_fn(request)
        return response, (time.perf_counter() - t0) * 1000

    def scored_pass(
        self, queries: list[tuple[str, str]], per_page: bool, progress: Callable | None
    ) -> tuple[dict[str, list[str]], list[float]]:
        """Pass 1: each query at n=DEPTH; the ranked doc ids per query (the run that is scored)
        and the latencies."""
        run: dict[str, list[str]] = {}
        first_ms = []
        for n, (qid, text) in enumerate(queries, start=1):
            response, ms = self.call(text, DEPTH)
            first_ms.append(ms)
            if per_page:  # the page of each match, as search_run adds it (outside the timed call)
                from search.pipeline.dispatch import where_found

                where_found(response.results)
            run[qid] = list(dict.fromkeys(result_doc_id(result, per_page=per_page) for result in response.results))
            if progress:
                progress(n, 2 * len(queries), qid)
        return run, first_ms

    def timed_pass(
        self, queries: list[tuple[str, str]], progress: Callable | None, *, done: int
    ) -> tuple[list[float], list[float]]:
        """Pass 2, warm: the latencies of each query at n=10 and at n=DEPTH. `done`: the queries
        of pass 1, counted in the progress."""
        top_ms, deep_ms = [], []
        for n, (qid, text) in enumerate(queries, start=1):
            top_ms.append(self.call(text, 10)[1])
            deep_ms.append(self.call(text, DEPTH)[1])
            if progress:
                progress(done + n, 2 * done, qid)
        return top_ms, deep_ms


def _write_run_file(path: str, queries: list[tuple[str, str]], run: dict[str, list[str]]) -> None:
    """The run in TREC-like form: query id, rank, doc id per line."""
    with open(path, "w", encoding="utf-8") as handle:
        for qid, _ in queries:
            for rank, doc_id in enumerate(run.get(qid, []), start=1):
                handle.write(f"{qid}\t{rank}\t{doc_id}\n")


def _latencies(first_ms: list[float], top_ms: list[float], deep_ms: list[float]) -> dict[str, float]:
    return {
        "n10_p50": percentile(top_ms, 50),
        "n10_p95": percentile(top_ms, 95),
        f"n{DEPTH}_p50": percentile(deep_ms, 50),
        f"n{DEPTH}_p95": percentile(deep_ms, 95),
        f"first_pass_n{DEPTH}_p50": percentile(first_ms, 50),
        f"first_pass_n{DEPTH}_p95": percentile(first_ms, 95),
    }


def _group_lines(groups: dict[str, dict]) -> list[tuple[str, str]]:
    """One report line per query group: its metrics and where its known items ranked."""
    lines = []
    for group, values in groups.items():
        median = "—" if values["median_rank"] is None else f"{values['median_rank']:g}"
        lines.append(
            (
                f"group {group}",
                f"nDCG@10 {values['nDCG@10']:.4f}  MRR@10 {values['MRR@10']:.4f}  "
                f"known item: #1 {values['top1']}/{values['queries']}, "
                f"top 10 {values['top10']}/{values['queries']}, median rank {median}, "
                f"not found {values['missing']}",
            )
        )
    return lines


def _latency_lines(latency: dict[str, float]) -> list[tuple[str, str]]:
    """The report's latency lines, warm and cold, and how they were measured."""
    return [
        ("latency n=10", f"p50 {latency['n10_p50']:.1f} ms  p95 {latency['n10_p95']:.1f} ms  (warm)"),
        (f"latency n={DEPTH}", f"p50 {latency[f'n{DEPTH}_p50']:.1f} ms  p95 {latency[f'n{DEPTH}_p95']:.1f} ms  (warm)"),
        (
            f"first pass n={DEPTH}",
            f"p50 {latency[f'first_pass_n{DEPTH}_p50']:.1f} ms  "
            f"p95 {latency[f'first_pass_n{DEPTH}_p95']:.1f} ms  (cold query vectors)",
        ),
        (
            "latency method",
            f"warm = timed on a second pass, after a first pass at n={DEPTH} "
            "(the scored run) cached the query vectors and warmed the buffers",
        ),
    ]


def _keyword_service(request):
    from search.retrieval.keyword import keyword_search

    return keyword_search(request)


# --- hybrid `query` modes (variants without the LLM stages) ---------------------------------


def query_mode(**request_options) -> Callable[[str, BenchOptions], BenchReport]:
    """`query` through bench_retrieval, plus the median time of each pipeline stage."""

    def run(dataset_dir: str, options: BenchOptions) -> BenchReport:
        from search.pipeline.hybrid import hybrid_search

        stages: dict[str, list[float]] = {}
        warnings: dict[str, int] = {}
        current = {"pass": 1}

        def on_pass(number: int) -> None:
            current["pass"] = number

        def service(request):
            response = hybrid_search(request)
            if request.limit == DEPTH:
                if current["pass"] == 2:  # stage times of the warm pass, like the latencies
                    for stage, ms in response.timings.items():
                        stages.setdefault(stage, []).append(ms)
                else:  # warnings of the scored run
                    for message in response.warnings:
                        warnings[message] = warnings.get(message, 0) + 1
            return response

        report = bench_retrieval(
            dataset_dir, options, service_fn=service, mode=Mode.HYBRID, on_pass=on_pass, **request_options
        )
        if request_options:
            report.title += " (" + ", ".join(f"{k}={v}" for k, v in request_options.items()) + ")"
        for stage, values in stages.items():
            report.lines.append(
                (
                    f"stage {stage} n={DEPTH} (warm)",
                    f"p50 {percentile(values, 50):.1f} ms  p95 {percentile(values, 95):.1f} ms",
                )
            )
        for message, count in sorted(warnings.items(), key=lambda kv: -kv[1])[:5]:
            report.lines.append(("warning", f"{count}× {message[:160]}"))
        report.data["stage_ms"] = {s: {"p50": percentile(v, 50), "p95": percentile(v, 95)} for s, v in stages.items()}
        report.data["warnings"] = warnings
        return report

    return run
