"""The modes of `pmd bench`: `MODES[name] = function(dataset_dir, options) -> BenchReport`.

The registry imports every bench module; they import only pmd_site/bench/quality.py (datasets,
metrics, the retrieval loop), never each other, so there is no cycle.
"""

from __future__ import annotations

from typing import Callable

from pmd_site.bench.quality import (
    BenchOptions,
    BenchReport,
    _keyword_service,
    bench_index,
    query_mode,
    retrieval_mode,
)
from search import Mode, mode_verb


def _vsearch(dataset_dir: str, options: BenchOptions) -> BenchReport:
    from pmd_site.bench import vector  # Django and the LLM clients: imported when run, not for `pmd --help`

    return vector.bench_vsearch(dataset_dir, options)


def _history(dataset_dir: str, options: BenchOptions) -> BenchReport:
    from pmd_site.bench.history import bench_history  # imported when run, like the vector modes

    return bench_history(dataset_dir, options)


def _filtered(dataset_dir: str, options: BenchOptions) -> BenchReport:
    from pmd_site.bench import filtered  # imported when run, like the vector modes

    return filtered.bench_filtered(dataset_dir, options)


def _vsearch_scale(dataset_dir: str, options: BenchOptions) -> BenchReport:
    from pmd_site.bench import vector

    return vector.bench_vsearch_scale(dataset_dir, options)


def _vector_scale(dataset_dir: str | None, options: BenchOptions) -> BenchReport:
    from pmd_site.bench import scale  # numpy: imported when run

    return scale.bench_vector_scale(dataset_dir, options)


def _keyword_scale(dataset_dir: str, options: BenchOptions) -> BenchReport:
    from pmd_site.bench import scale

    return scale.bench_keyword_scale(dataset_dir, options)


MODES: dict[str, Callable[[str, BenchOptions], BenchReport]] = {
    "index": bench_index,
    mode_verb(Mode.KEYWORD): retrieval_mode(_keyword_service, Mode.KEYWORD),
    mode_verb(Mode.VECTOR): _vsearch,  # embedding throughput, HNSW recall, then retrieval
    "vsearch-scale": _vsearch_scale,  # HNSW at 100k+ chunks
    "keyword-scale": _keyword_scale,  # --size passages written to DATASET_DIR, pmd's BM25 index, n=10
    "vector-scale": _vector_scale,  # pgvector at --size synthetic vectors: vector, halfvec, bit; filtered
    mode_verb(Mode.HYBRID): query_mode(),
    "query-no-expand": query_mode(expand=False),
    "query-no-rerank": query_mode(rerank=False),
    "query-no-llm": query_mode(expand=False, rerank=False),
    "history": _history,  # DATASET_DIR is a git work tree: commits/s and history search latency
    "filtered": _filtered,  # filters at --docs synthetic notes (DATASET_DIR: where to write them)
}

NO_DATASET = {"vector-scale"}  # modes that generate their data (DATASET_DIR optional)
