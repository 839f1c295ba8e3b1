"""Does a quantized ONNX file keep retrieval quality? nDCG@10 on SciFact (a fixed subset: every
judged document plus the first --distractors others), each document's first window embedded
by the local backend, once with each model folder:

    .venv/bin/python scripts/bench/embed_quality.py FOLDER_A FOLDER_B [--distractors 700]

Each folder after the first is also crossed with the first: documents embedded with one file and
queries with the other, as an index is searched after PMD_LOCAL_PRECISION changes.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from indexing.llm.local import LocalBackend  # noqa: E402 - once the repository is on sys.path


def ndcg10(ranked: list[str], relevant: set[str]) -> float:
    gain = sum(1 / math.log2(i + 2) for i, doc in enumerate(ranked[:10]) if doc in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    return gain / ideal if ideal else 0.0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--dataset", default=str(ROOT.parent / "shared/datasets/scifact"))
    parser.add_argument("--distractors", type=int, default=700)
    args = parser.parse_args()

    dataset = Path(args.dataset)
    qrels: dict[str, set[str]] = {}
    for line in (dataset / "qrels.tsv").read_text().splitlines():
        query, doc, grade = line.split("\t")
        if int(grade) > 0:
            qrels.setdefault(query, set()).add(doc)
    judged = set().union(*qrels.values())
    others = [p.stem for p in sorted((dataset / "docs").glob("*.md")) if p.stem not in judged][: args.distractors]
    docs = sorted(judged) + others
    texts = [(dataset / "docs" / f"{doc}.md").read_text() for doc in docs]
    queries = {
        q: t
        for q, t in (line.split("\t", 1) for line in (dataset / "queries.tsv").read_text().splitlines())
        if q in qrels
    }
    backend = LocalBackend(Path(tempfile.mkdtemp()), threads=2)
    print(f"SciFact subset: {len(docs)} documents ({len(judged)} judged), {len(queries)} queries")

    def quality(vectors, query_vectors) -> float:
        scores = []
        for query, q in query_vectors.items():
            ranked = [docs[i] for i in np.argsort(-(vectors @ q))[:10]]
            scores.append(ndcg10(ranked, qrels[query]))
        return sum(scores) / len(scores)

    first = None
    for folder in args.folders:
        vectors = np.array(
            [v for i in range(0, len(texts), 32) for v in backend.embed(texts[i : i + 32], model=folder)]
        )
        query_vectors = {query: np.array(backend.embed([text], model=folder)[0]) for query, text in queries.items()}
        print(f"{folder}: nDCG@10 {quality(vectors, query_vectors):.4f}", flush=True)
        if first is None:
            first = (folder, vectors, query_vectors)
            continue
        # An index embedded with one file and searched with the other (a setting changed later).
        cosines = (vectors * first[1]).sum(axis=1) / (
            np.linalg.norm(vectors, axis=1) * np.linalg.norm(first[1], axis=1)
        )
        print(
            f"  documents of {first[0]}, queries of this one: {quality(first[1], query_vectors):.4f}; "
            f"the other way: {quality(vectors, first[2]):.4f}; cosine of the two files' document vectors: "
            f"min {cosines.min():.4f}, median {np.median(cosines):.4f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
