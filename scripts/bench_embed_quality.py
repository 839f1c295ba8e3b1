"""Does a quantized ONNX file keep retrieval quality? nDCG@10 on SciFact (a fixed subset: every
judged document plus the first --distractors others), each document's first window embedded
by the local backend, once with each model folder:

    .venv/bin/python scripts/bench_embed_quality.py FOLDER_A FOLDER_B [--distractors 700]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


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
    import numpy as np

    from indexing.llm.local import LocalBackend

    dataset = Path(args.dataset)
    qrels: dict[str, set[str]] = {}
    for line in (dataset / "qrels.tsv").read_text().splitlines():
        query, doc, grade = line.split("\t")
        if int(grade) > 0:
            qrels.setdefault(query, set()).add(doc)
    judged = set().union(*qrels.values())
    others = [p.stem for p in sorted((dataset / "docs").glob("*.md")) if p.stem not in judged][:args.distractors]
    docs = sorted(judged) + others
    texts = [(dataset / "docs" / f"{doc}.md").read_text() for doc in docs]
    queries = {q: t for q, t in (line.split("\t", 1) for line in (dataset / "queries.tsv").read_text().splitlines())
               if q in qrels}
    backend = LocalBackend(Path(tempfile.mkdtemp()), threads=2)
    print(f"SciFact subset: {len(docs)} documents ({len(judged)} judged), {len(queries)} queries")
    for folder in args.folders:
        vectors = np.array([v for i in range(0, len(texts), 32)
                            for v in backend.embed(texts[i:i + 32], model=folder)])
        scores = []
        for query, text in queries.items():
            q = np.array(backend.embed([text], model=folder)[0])
            ranked = [docs[i] for i in np.argsort(-(vectors @ q))[:10]]
            scores.append(ndcg10(ranked, qrels[query]))
        print(f"{folder}: nDCG@10 {sum(scores) / len(scores):.4f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
