"""Passage recall of Ask's packing at 2k/4k/8k token budgets on scifact-long (odd queries only: nothing
fitted on even ones). Run: PMD_HOME=... .venv/bin/python manage.py shell -c "exec(open('scripts/bench_ask_packing.py').read())"
after `pmd collection add ../shared/datasets/scifact-long/docs --name scifact-long`."""
import csv, time, statistics, sys
from pathlib import Path
from indexing.access import Access
from search.pipeline.dispatch import search_run
from search.pipeline.answer import passages_pack
from search.request import Mode, SearchRequest
from django.conf import settings

D = Path("/work/shared/datasets")
titles = {}
for p in (D / "scifact/docs").glob("*.md"):
    titles[p.stem] = p.read_text().splitlines()[0].lstrip("# ").strip()
queries = dict(line.rstrip("\n").split("\t", 1) for line in open(D / "scifact/queries.tsv"))
rel = {}
for q, d, g in csv.reader(open(D / "scifact/qrels.tsv"), delimiter="\t"):
    if int(g) > 0:
        rel.setdefault(q, []).append(titles[d])
ids = [q for q in rel if int(q) % 2 == 1]
mode = sys.argv[1] if len(sys.argv) > 1 else Mode.HYBRID
budgets = (2000, 4000, 8000)
hit = {b: 0 for b in budgets}; tot = 0; lat = []; pack_ms = []; npass = {b: [] for b in budgets}
for q in ids:
    t0 = time.perf_counter()
    r = search_run(SearchRequest(query=queries[q], mode=mode, limit=settings.PMD_ANSWER_PASSAGES,
                                 access=Access.local_user(), hits_per_document=2))
    lat.append((time.perf_counter() - t0) * 1000)
    for b in budgets:
        t1 = time.perf_counter()
        ps = passages_pack(r.results, budget=b)
        if b == 4000: pack_ms.append((time.perf_counter() - t1) * 1000)
        npass[b].append(len(ps))
        text = "\n".join(p.text for p in ps).lower()
        hit[b] += sum(1 for t in rel[q] if t.lower()[:80] in text)
    tot += len(rel[q])
print(f"queries {len(ids)} relevant passages {tot} mode {mode}")
for b in budgets:
    print(f"budget {b}: passage recall {hit[b]/tot:.3f}  passages mean {statistics.mean(npass[b]):.1f}")
print(f"retrieval p50 {statistics.median(lat):.1f} ms; packing (4k) p50 {statistics.median(pack_ms):.1f} ms p95 {sorted(pack_ms)[int(.95*len(pack_ms))]:.1f}")
