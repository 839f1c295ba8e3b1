"""`pmd bench REPO --mode history`: history indexing throughput and history search latency on a real
git repository (a work tree; the REPO folder is the collection's root).

Indexing: the first index of the newest `--commits N` commits (default PMD_HISTORY_MAX_COMMITS),
as commits/s, then an unchanged re-index (HEAD as indexed: nothing read). Search: queries made
of two words of the titles of every 50th commit, timed warm (a first pass warms the buffers) in
keyword mode at n=10, then with an author filter, a path filter and a date range, and in hybrid
mode when commit text is embedded (`pmd embed` first).
"""

from __future__ import annotations

import re
import statistics
import time
from pathlib import Path

from indexing.access import Access
from indexing.errors import BenchmarkError
from indexing.git import git_run
from indexing.models import Collection, Commit
from indexing.services.collections import collection_create
from indexing.services.history import history_index
from pmd_site.bench.quality import BenchOptions, BenchReport
from search import HistoryRequest, history_search
from search.retrieval.history import history_embedded_fingerprint

QUERY_EVERY = 50
_WORD = re.compile(r"[A-Za-z]{4,}")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def bench_history(repo_dir: str, options: BenchOptions) -> BenchReport:
    """(The CLI builds its parser from this module before Django is set up: models are imported here.)"""
    commits = options.commits
    root = Path(repo_dir).expanduser().resolve()
    if not root.is_dir():
        raise BenchmarkError(f"{root} is not a folder")
    head = git_run(str(root), "log", "-1", "--no-show-signature", "--format=%H %cI", text=True, timeout=60)
    if head.returncode != 0:
        raise BenchmarkError(f"{root} is not a git work tree")
    name = options.collection or f"bench-history-{root.name}"
    existing = Collection.objects.filter(name=name).first()
    if existing is not None and (options.fresh or existing.root_path != str(root)):
        existing.delete()
        existing = None
    collection = existing or collection_create(path=root, name=name, mask="pmd-bench-no-files/*.none")
    started = time.perf_counter()
    first = history_index(collection, progress=options.progress, max_commits=commits)
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    again = history_index(collection, max_commits=commits)
    again_s = time.perf_counter() - started
    total = Commit.objects.filter(collection=collection).count()

    titles = list(
        Commit.objects.filter(collection=collection)
        .order_by("-committed_at", "sha")
        .values_list("title", "author_name", "paths")[::QUERY_EVERY]
    )
    queries = []
    for title, author, paths in titles:
        words = _WORD.findall(title)
        if len(words) >= 2:
            queries.append((" ".join(words[:2]).lower(), author, paths[0] if paths else ""))
    if not queries:
        raise BenchmarkError("no commit titles to make queries from")
    access = Access.local_user

    def timed(mode: str, **filters) -> tuple[list[float], int]:
        latencies, found = [], 0
        for pass_ in (1, 2):
            for words, author, path in queries:
                request = HistoryRequest(
                    query=words,
                    access=access(),
                    mode=mode,
                    collections=[name],
                    limit=10,
                    author=author if filters.get("author") else "",
                    paths=[path] if filters.get("path") and path else [],
                    after=filters.get("after"),
                    before=filters.get("before"),
                )
                began = time.perf_counter()
                response = history_search(request)
                if pass_ == 2:
                    latencies.append((time.perf_counter() - began) * 1000)
                    found += bool(response.results)
        return latencies, found

    report = BenchReport(f"history {root.name} at {head.stdout.split()[0][:12]} ({head.stdout.split()[1][:10]})")
    rate = first.added / first_s if first_s else 0.0
    report.lines += [
        ("commits indexed", f"{total:,}" + (f" (capped: {first.message})" if first.message else "")),
        ("first index", f"{first_s:.2f} s  ({rate:,.0f} commits/s)"),
        ("unchanged re-index", f"{again_s * 1000:.1f} ms"),
    ]
    report.data = {
        "repository": str(root),
        "head": head.stdout.strip(),
        "commits": total,
        "first_seconds": first_s,
        "commits_per_second": rate,
        "unchanged_ms": again_s * 1000,
        "queries": len(queries),
    }
    dates = list(
        Commit.objects.filter(collection=collection)
        .order_by("committed_at")
        .values_list("committed_at", flat=True)[:: max(1, total // 3)]
    )  # the middle third
    span = {"after": dates[1].date().isoformat(), "before": dates[2].date().isoformat()} if len(dates) >= 3 else {}
    cases = [
        ("keyword", {}),
        ("keyword + author", {"author": True}),
        ("keyword + path", {"path": True}),
        ("keyword + dates (middle third)", span),
    ]

    if history_embedded_fingerprint() is not None:
        cases.append(("hybrid", {}))
    for label, filters in cases:
        mode = "hybrid" if label == "hybrid" else "keyword"
        latencies, found = timed(mode, **filters)
        p50, p95 = statistics.median(latencies), _percentile(latencies, 0.95)
        report.lines.append(
            (f"{label}, n=10 ({len(queries)} queries)", f"p50 {p50:.1f} ms  p95 {p95:.1f} ms  ({found} with results)")
        )
        report.data[label] = {"p50_ms": p50, "p95_ms": p95, "with_results": found}
    if again.unchanged is False:
        report.lines.append(("note", "the re-index read commits: HEAD moved while benchmarking?"))
    return report
