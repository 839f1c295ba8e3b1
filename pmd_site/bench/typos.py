"""`pmd bench DATASET --mode MODE --typos`: retrieval quality with one typo in each query.

Each query gets one synthetic typo in its rarest word (the word of at least four letters the fewest
passages of the collection hold): a deletion, a transposition of two neighbouring letters or a
substitution, chosen with a fixed seed per query, so every run types the same typos. The queries go
through search_run (where typos are corrected), four times: clean and with typos, each with the
correction off and on; nDCG@10 (and the other metrics) of each are reported, and the ratio typos /
clean with the correction on (the goal is ≥ 0.95) and the change on clean queries (≤ 0.003).
"""

from __future__ import annotations

import random
import re
import string

from django.db import connection

from indexing.errors import BenchmarkError
from pmd_site.bench.quality import BenchOptions, BenchReport, bench_retrieval
from search import Mode, search_run

SEED = 31
KINDS = ("deletion", "transposition", "substitution")
MIN_LETTERS = 4
_WORD = re.compile(r"[^\W\d_]+")

# The retrieval modes the typo bench runs, with their request options.
TYPO_MODES = {
    "search": (Mode.KEYWORD, {}),
    "vsearch": (Mode.VECTOR, {}),
    "query": (Mode.HYBRID, {}),
    "query-no-expand": (Mode.HYBRID, {"expand": False}),
    "query-no-rerank": (Mode.HYBRID, {"rerank": False}),
    "query-no-llm": (Mode.HYBRID, {"expand": False, "rerank": False}),
}


def misspelt(word: str, rng: random.Random) -> tuple[str, str]:
    """(the word with one typo, its kind)."""
    kind = rng.choice(KINDS)
    i = rng.randrange(len(word) - 1) if kind == "transposition" else rng.randrange(len(word))
    if kind == "deletion":
        return word[:i] + word[i + 1 :], kind
    if kind == "transposition":
        if word[i] == word[i + 1]:  # swapping equal letters changes nothing: substitute instead
            kind = "substitution"
        else:
            return word[:i] + word[i + 1] + word[i] + word[i + 2 :], kind
    letter = rng.choice([c for c in string.ascii_lowercase if c != word[i].lower()])
    return word[:i] + letter + word[i + 1 :], kind


def typo_queries(queries: list[tuple[str, str]], collection, seed: int = SEED) -> list[tuple[str, str]]:
    """The queries with one typo in their rarest word (by the collection's document frequencies)."""
    words = sorted({w.lower() for _, text in queries for w in _WORD.findall(text) if len(w) >= MIN_LETTERS})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT w.t, coalesce((SELECT max(t.df) FROM unnest(to_tsvector(%s::regconfig, w.t)) u"
            " JOIN search_keyword_term t ON t.lexeme = u.lexeme AND t.collection_id = %s), 0)"
            " FROM unnest(%s::text[]) w(t)",
            [collection.text_search_config, collection.pk, words],
        )
        df = dict(cursor.fetchall())
    out = []
    for qid, text in queries:
        found = [m for m in _WORD.finditer(text) if len(m.group(0)) >= MIN_LETTERS]
        if not found:
            out.append((qid, text))
            continue
        # the rarest word the collection holds (a word it lacks cannot be found either way); ties: the first
        held = [m for m in found if df.get(m.group(0).lower(), 0) > 0] or found
        target = min(held, key=lambda m: df.get(m.group(0).lower(), 0))
        typo, _ = misspelt(target.group(0), random.Random(f"{seed}:{qid}"))
        out.append((qid, text[: target.start()] + typo + text[target.end() :]))
    return out


def bench_typos(dataset_dir: str, options: BenchOptions, *, mode_name: str) -> BenchReport:
    if mode_name not in TYPO_MODES:
        raise BenchmarkError(f"--typos measures the retrieval modes: {', '.join(TYPO_MODES)}")
    mode, request_options = TYPO_MODES[mode_name]
    runs = {}
    examples: list[tuple[str, str]] = []

    def with_typos(queries, collection):
        changed = typo_queries(queries, collection)
        if not examples:
            examples.extend((a[1], b[1]) for a, b in zip(queries[:3], changed[:3]))
        return changed

    for label, rewrite, correct in (
        ("clean, correction off", None, False),
        ("clean, correction on", None, True),
        ("typos, correction off", with_typos, False),
        ("typos, correction on", with_typos, True),
    ):
        report = bench_retrieval(
            dataset_dir,
            options,
            service_fn=search_run,
            mode=mode,
            rewrite=rewrite,
            timed=False,
            correct=correct,
            **request_options,
        )
        runs[label] = report.data["metrics"]
        name = report.title
    clean, typos = runs["clean, correction on"]["nDCG@10"], runs["typos, correction on"]["nDCG@10"]
    out = BenchReport(f"{name}, one typo per query (seed {SEED})")
    for label, metrics in runs.items():
        out.lines.append(
            (
                label,
                f"nDCG@10 {metrics['nDCG@10']:.4f}  R@100 {metrics['Recall@100']:.4f}  MRR@10 {metrics['MRR@10']:.4f}",
            )
        )
    out.lines.append(("typos / clean (on)", f"{typos / clean if clean else 0:.3f}  (the goal: ≥ 0.95)"))
    out.lines.append(("clean: on − off", f"{clean - runs['clean, correction off']['nDCG@10']:+.4f}  (≥ −0.003)"))
    for before, after in examples:
        out.lines.append(("example", f"{before!r} → {after!r}"))
    out.data = {
        "runs": runs,
        "ratio": typos / clean if clean else 0.0,
        "seed": SEED,
        "clean_change": clean - runs["clean, correction off"]["nDCG@10"],
    }
    return out
