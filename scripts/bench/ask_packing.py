"""Passage recall of Ask's packing at 2k/4k/8k token budgets on scifact-long (odd queries only: nothing
fitted on even ones), and the time before the model's first token: retrieval, packing, and Ask's whole
overhead (its first token minus its retrieval, with a chat model that answers at once, so only pmd's
part is measured). Run: PMD_HOME=... .venv/bin/python manage.py shell -c "import sys; sys.argv=['', 'hybrid'];
exec(open('scripts/bench/ask_packing.py').read())" after `pmd collection add ../shared/datasets/scifact-long/docs
--name scifact-long` (and `pmd embed` for hybrid; the mode defaults to hybrid)."""

import csv
import statistics
import sys
import time
from pathlib import Path

from django.conf import settings

from indexing.access import Access
from indexing.llm.base import ChatDelta
from search.pipeline import answer as ask_module
from search.pipeline.answer import AskRequest, ask_run, passages_pack
from search.pipeline.dispatch import search_run
from search.request import Mode, SearchRequest

D = Path("/work/shared/datasets")
titles = {}
for p in (D / "scifact/docs").glob("*.md"):
    titles[p.stem] = p.read_text().splitlines()[0].lstrip("# ").strip()
with open(D / "scifact/queries.tsv") as f:
    queries = dict(line.rstrip("\n").split("\t", 1) for line in f)
rel = {}
with open(D / "scifact/qrels.tsv") as f:
    for q, d, g in csv.reader(f, delimiter="\t"):
        if int(g) > 0:
            rel.setdefault(q, []).append(titles[d])
ids = [q for q in rel if int(q) % 2 == 1]
mode = sys.argv[1] if len(sys.argv) > 1 else Mode.HYBRID
budgets = (2000, 4000, 8000)
hit = {b: 0 for b in budgets}
tot = 0
lat = []
pack_ms = []
npass = {b: [] for b in budgets}
for q in ids:
    t0 = time.perf_counter()
    r = search_run(
        SearchRequest(
            query=queries[q],
            mode=mode,
            limit=settings.PMD_ANSWER_PASSAGES,
            access=Access.local_user(),
            hits_per_document=2,
        )
    )
    lat.append((time.perf_counter() - t0) * 1000)
    for b in budgets:
        t1 = time.perf_counter()
        ps = passages_pack(r.results, budget=b)
        if b == 4000:
            pack_ms.append((time.perf_counter() - t1) * 1000)
        npass[b].append(len(ps))
        text = "\n".join(p.text for p in ps).lower()
        hit[b] += sum(1 for t in rel[q] if t.lower()[:80] in text)
    tot += len(rel[q])
print(f"queries {len(ids)} relevant passages {tot} mode {mode}")
for b in budgets:
    print(f"budget {b}: passage recall {hit[b] / tot:.3f}  passages mean {statistics.mean(npass[b]):.1f}")


class AtOnce:
    """A chat model that answers at once: Ask's time to its first token is then pmd's own."""

    def chat_stream(self, messages, **options):
        yield ChatDelta(content="From the notes [1].")
        yield ChatDelta(done=True, tokens_in=1, tokens_out=1, model="at-once")


ask_module.get_backend = lambda **_: AtOnce()
settings.PMD_ANSWER_MODEL = "at-once"
settings.PMD_ANSWER_MIN_SCORE = 0.0  # every question goes to the model
ask_retrieval, overhead = [], []
for q in ids:
    t = ask_run(AskRequest(question=queries[q], access=Access.local_user(), budget=4000, record=False)).timings
    ask_retrieval.append(t["retrieval"])
    overhead.append(t["first_token"] - t["retrieval"])


def p(values, q):
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


print(
    f"retrieval p50 {statistics.median(lat):.1f} ms p95 {p(lat, 0.95):.1f}; packing (4k) p50 "
    f"{statistics.median(pack_ms):.1f} ms p95 {p(pack_ms, 0.95):.1f}"
)
print(
    f"ask: retrieval p50 {statistics.median(ask_retrieval):.1f} ms p95 {p(ask_retrieval, 0.95):.1f}; first token - "
    f"retrieval p50 {statistics.median(overhead):.1f} ms p95 {p(overhead, 0.95):.1f}"
)
