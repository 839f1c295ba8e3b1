"""`pmd bench --mode vector-scale` at a tiny size: it runs, prints every storage's recall and
latency columns, and its numpy ground truth agrees with PostgreSQL's exact scan (no timings
asserted: the machine is shared)."""

from __future__ import annotations

import pytest

from indexing.errors import BenchmarkError
from pmd_site.bench.quality import BenchOptions
from pmd_site.bench.scale import STORAGES, bench_vector_scale

pytestmark = pytest.mark.django_db


def test_vector_scale_runs_at_a_tiny_size_and_prints_its_table(run_cli):
    code, out, _ = run_cli("bench", "--mode", "vector-scale", "--size", "1000", "--queries", "20")
    assert code == 0
    assert "vector-scale, 1,000 synthetic 384d vectors" in out
    assert "recall@10" in out and "p50" in out and "p95" in out
    for label in (
        "vector, ef 40",
        "halfvec, ef 100",
        "bit, ef 40, re-rank top 40",
        "filter, iterative scan",
        "filter, partial index",
    ):
        assert label in out

    # a second run keeps the table and its indexes, and measures the same shapes
    data = bench_vector_scale(None, BenchOptions(size=1000, limit=20)).data
    assert data["load_seconds"] is None and data["storages"]["vector"]["build_seconds"] is None
    assert data["exact"]["recall"] == 1.0, "numpy's exact answers are PostgreSQL's"
    assert set(data["storages"]) == set(STORAGES)
    for entry in data["storages"].values():
        assert entry["index_mb"] > 0 and entry["runs"]
        assert all(0 <= run["recall"] <= 1 and run["p50_ms"] > 0 for run in entry["runs"].values())
    assert data["storages"]["vector"]["runs"]["ef 100"]["recall"] >= 0.9
    assert data["filtered"]["filter, partial index, ef 100"]["recall"] >= 0.9


def test_vector_scale_wants_a_thousand_vectors(run_cli):
    with pytest.raises(BenchmarkError):
        bench_vector_scale(None, BenchOptions(size=10))
    code, _, err = run_cli("bench", "--mode", "search")
    assert code != 0 and "DATASET_DIR" in err


def test_keyword_scale_indexes_its_passages_and_times_keyword_search(run_cli, tmp_path):
    code, out, _ = run_cli(
        "bench", str(tmp_path / "kw"), "--mode", "keyword-scale", "--size", "1000", "--queries", "10"
    )
    assert code == 0
    assert "keyword-scale, 1,000 passages" in out and "p50" in out and "p95" in out
    assert len(list((tmp_path / "kw" / "docs").rglob("*.md"))) == 100  # ten passages a note
