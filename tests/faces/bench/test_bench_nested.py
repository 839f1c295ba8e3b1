"""`pmd bench` on a dataset whose documents live in sub-folders, and `--split odd|even|all`."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.django_db

TOPICS = {  # doc id: (folder, words)
    "x": ("a", "tomato garden greenhouse watering"),
    "y": ("b", "postgres vacuum autovacuum bloat"),
    "z": ("b/deeper", "sourdough starter flour hydration"),
    "w": ("a", "kubernetes rollout deployment pods"),
    "v": ("c", "violin bow rosin strings"),
}
QUERIES = [
    ("q1", "tomato greenhouse", "x"),
    ("q2", "autovacuum bloat", "y"),
    ("q3", "sourdough hydration", "z"),
    ("q4", "kubernetes rollout", "w"),
    ("q5", "violin rosin", "v"),
]


@pytest.fixture
def nested_dataset(tmp_path):
    root = tmp_path / "nested"
    for doc_id, (folder, words) in TOPICS.items():
        (root / "docs" / folder).mkdir(parents=True, exist_ok=True)
        (root / "docs" / folder / f"{doc_id}.md").write_text(
            f"---\ntitle: {doc_id}\n---\n\n## {words.split()[0]}\n\n{words}. {words}.\n"
        )
    (root / "queries.tsv").write_text("".join(f"{q}\t{text}\n" for q, text, _ in QUERIES))
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, _, d in QUERIES))
    return root


def test_bench_scores_nested_docs_by_file_name(nested_dataset, tmp_path):
    from pmd_site.bench.modes import MODES
    from pmd_site.bench.quality import BenchOptions

    run_file = tmp_path / "run.tsv"
    report = MODES["search"](str(nested_dataset), BenchOptions(run_file=str(run_file)))
    assert report.data["metrics"]["nDCG@10"] == pytest.approx(1.0)
    assert report.data["metrics"]["Recall@100"] == pytest.approx(1.0)
    rows = [line.split("\t") for line in run_file.read_text().splitlines()]
    top = {q: d for q, rank, d in rows if rank == "1"}
    assert top == {q: d for q, _, d in QUERIES}, "ids are file names without folder or .md"
    assert all("/" not in d and not d.endswith(".md") for _, _, d in rows)
    assert report.data["split"]["name"] == "all" and report.data["queries"] == 5
    assert set(report.data["latency_ms"]) >= {"n10_p50", "n10_p95", "n100_p50", "n100_p95"}


def test_bench_split_odd_and_even_partition_the_queries(nested_dataset, tmp_path):
    from pmd_site.bench.modes import MODES
    from pmd_site.bench.quality import BenchOptions

    halves = {}
    for split in ("odd", "even"):
        run_file = tmp_path / f"{split}.tsv"
        report = MODES["search"](str(nested_dataset), BenchOptions(run_file=str(run_file), split=split))
        halves[split] = {line.split("\t")[0] for line in run_file.read_text().splitlines()}
        assert report.data["metrics"]["nDCG@10"] == pytest.approx(1.0)
        assert report.data["split"] == {
            "name": split,
            "queries": len(halves[split]),
            "of": 5,
            "rule": report.data["split"]["rule"],
        }
        assert split in report.title and split in dict(report.lines)["split"]
    assert halves == {"odd": {"q1", "q3", "q5"}, "even": {"q2", "q4"}}


def test_bench_cli_split_json_and_text(nested_dataset, run_cli):
    code, out, err = run_cli("bench", str(nested_dataset), "--mode", "search", "--split", "even", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["split"]["name"] == "even" and data["queries"] == 2 and data["metrics"]["nDCG@10"] > 0
    assert "1-based" in data["split"]["rule"]
    code, out, err = run_cli("bench", str(nested_dataset), "--mode", "search", "--split", "odd")
    assert code == 0, err
    assert "search nested, odd queries" in out and "odd (3 of 5 queries; 1-based position" in out
    assert "latency n=10" in out and "latency n=100" in out and "warm" in out


@pytest.mark.django_db(transaction=True)  # the hybrid pipeline runs its arms on their own connections
def test_hybrid_bench_times_a_second_pass_with_cached_query_vectors(nested_dataset, ollama, settings, monkeypatch):
    from indexing.services.embedding import embed_pending
    from pmd_site.bench import quality
    from pmd_site.bench.modes import MODES
    from pmd_site.bench.quality import BenchOptions

    settings.PMD_CHUNK_TOKENS = 40
    calls_per_pass = []
    original = quality.bench_retrieval

    def counting(*args, on_pass=None, **kwargs):
        def hook(number):
            calls_per_pass.append(ollama.embed_calls)
            on_pass(number)

        return original(*args, on_pass=hook, **kwargs)

    monkeypatch.setattr(quality, "bench_retrieval", counting)
    quality._bench_collection(nested_dataset, BenchOptions(), fresh=True)
    embed_pending()
    report = MODES["query-no-llm"](str(nested_dataset), BenchOptions(split="odd"))
    after = ollama.embed_calls
    assert report.data["metrics"]["nDCG@10"] > 0 and report.data["split"]["queries"] == 3
    assert not report.data["warnings"], "both arms ran"
    assert len(calls_per_pass) == 2 and after == calls_per_pass[1], "the timed pass embeds no query again"
    assert calls_per_pass[1] > calls_per_pass[0], "the first pass embedded the queries"
    assert {"n10_p50", "n10_p95"} <= set(report.data["latency_ms"]) and report.data["stage_ms"]
    assert "warm" in dict(report.lines)["latency n=10"]


def test_bench_reads_pdfs_and_scores_pages_when_the_qrels_name_pages(tmp_path, monkeypatch):
    import shutil

    from pmd_site.bench.modes import MODES
    from pmd_site.bench.quality import BenchOptions
    from tests.support.formats import FORMAT_FIXTURES, convert_once

    convert_once(monkeypatch)
    root = tmp_path / "pdfs"
    (root / "docs").mkdir(parents=True)
    shutil.copy(FORMAT_FIXTURES / "report.pdf", root / "docs" / "report.pdf")
    (root / "docs" / "keeper.md").write_text("# Keeper\n\nThe keeper logs the tides.\n")
    (root / "queries.tsv").write_text("q1\tfog horn repaired\nq2\tkeeper logs tides\n")
    (root / "qrels.tsv").write_text("q1\treport.pdf#page=2\t1\nq2\tkeeper\t1\n")
    run_file = tmp_path / "run.tsv"
    report = MODES["search"](str(root), BenchOptions(run_file=str(run_file)))
    top = {q: d for q, rank, d in (line.split("\t") for line in run_file.read_text().splitlines()) if rank == "1"}
    assert top == {"q1": "report.pdf#page=2", "q2": "keeper"}
    assert report.data["metrics"]["MRR@10"] == pytest.approx(1.0)
