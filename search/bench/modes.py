"""The modes of `pmd bench`: `MODES[name] = function(dataset_dir, options) -> BenchReport`.

The registry imports every bench module; they import only search/bench/quality.py (datasets,
metrics, the retrieval loop), never each other, so there is no cycle.
"""

from __future__ import annotations

from typing import Callable

from search.bench import filtered as bench_filtered
from search.bench import vector as bench_vector
from search.bench.quality import (
    BenchOptions,
    BenchReport,
    _keyword_service,
    bench_index,
    query_mode,
    retrieval_mode,
)
from search.request import Mode, mode_verb

MODES: dict[str, Callable[[str, BenchOptions], BenchReport]] = {
    "index": bench_index,
    mode_verb(Mode.KEYWORD): retrieval_mode(_keyword_service, Mode.KEYWORD),
    mode_verb(Mode.VECTOR): bench_vector.bench_vsearch,  # embedding throughput, HNSW recall, then retrieval
    "vsearch-scale": bench_vector.bench_vsearch_scale,  # HNSW at 100k+ chunks
    mode_verb(Mode.HYBRID): query_mode(),
    "query-no-expand": query_mode(expand=False),
    "query-no-rerank": query_mode(rerank=False),
    "query-no-llm": query_mode(expand=False, rerank=False),
    "filtered": bench_filtered.bench_filtered,  # filters at --docs synthetic notes (DATASET_DIR: where to write them)
}
