"""Embedding throughput of the local backend, side by side with an older version of it and with
PyTorch (sentence-transformers), interleaved round by round so a busy machine slows all alike:

    .venv/bin/python scripts/bench/embed.py MODEL_FOLDER [--old main] [--torch /path/to/python] [--also FOLDER]

MODEL_FOLDER is a sentence-transformers folder with model.onnx (and, for --torch, the PyTorch
weights). The texts are SciFact passages cut to --chars characters, sent in batches of --batch
as the embedding run sends them. --old REF loads indexing/llm/local.py as it is at git REF;
--torch PYTHON runs sentence-transformers in that interpreter (a virtualenv that has it).
Prints passages/s per round and the median, and how close the vectors are to this version's."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from indexing.llm import local  # noqa: E402 - once the repository is on sys.path

TORCH_CHILD = r"""
import json, sys, time
import torch
from sentence_transformers import SentenceTransformer
folder, threads, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
model = SentenceTransformer(folder, device="cpu")
texts = json.loads(sys.stdin.readline())
model.encode(texts[:batch], batch_size=batch)
print("ready", flush=True)
for line in sys.stdin:
    started, cpu = time.perf_counter(), time.process_time()
    vectors = []
    for i in range(0, len(texts), batch):
        vectors.extend(model.encode(texts[i:i + batch], batch_size=batch, normalize_embeddings=True).tolist())
    print(json.dumps({"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu,
                      "first": vectors[0]}), flush=True)
"""


def passages(dataset: Path, count: int, chars: int) -> list[str]:
    texts = []
    for path in sorted((dataset / "docs").glob("*.md"))[:count]:
        texts.append(path.read_text()[:chars])
    return texts


def load_old(ref: str):
    source = subprocess.run(
        ["git", "show", f"{ref}:indexing/llm/local.py"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "old_local.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_local", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(embed, texts: list[str], batch: int) -> tuple[float, float, list[list[float]]]:
    """Wall seconds, CPU seconds of this process (all its threads) and the vectors."""
    started, cpu = time.perf_counter(), time.process_time()
    vectors = []
    for i in range(0, len(texts), batch):
        vectors.extend(embed(texts[i : i + batch]))
    return time.perf_counter() - started, time.process_time() - cpu, vectors


def cosine(a, b) -> float:
    return sum(x * y for x, y in zip(a, b)) / (sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--dataset", default=str(ROOT.parent / "shared/datasets/scifact"))
    parser.add_argument("--passages", type=int, default=256)
    parser.add_argument("--chars", type=int, default=1200)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old", metavar="REF", help="also the local backend at this git ref")
    parser.add_argument("--torch", metavar="PYTHON", help="also sentence-transformers in this interpreter")
    parser.add_argument(
        "--also",
        metavar="FOLDER",
        action="append",
        default=[],
        help="also this model folder (another export of the same model), this version's loader",
    )
    args = parser.parse_args()

    folder = Path(args.model).resolve()
    texts = passages(Path(args.dataset), args.passages, args.chars)
    runners = {}
    new = local.LocalBackend(Path(tempfile.mkdtemp()), threads=args.threads)
    runners["onnx, this version"] = lambda chunk: new.embed(chunk, model=str(folder))
    for other in args.also:
        other_folder = Path(other).resolve()
        runners[f"onnx, {other_folder.name}"] = lambda chunk, f=other_folder: new.embed(chunk, model=str(f))
    if args.old:
        old_module = load_old(args.old)
        old = old_module.LocalBackend(Path(tempfile.mkdtemp()), threads=args.threads)
        runners[f"onnx, at {args.old}"] = lambda chunk: old.embed(chunk, model=str(folder))
    child = None
    if args.torch:
        child = subprocess.Popen(
            [args.torch, "-c", TORCH_CHILD, str(folder), str(args.threads), str(args.batch)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ, TOKENIZERS_PARALLELISM="false"),
        )
        child.stdin.write(json.dumps(texts) + "\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "ready"

        def torch_round(_texts=None):
            child.stdin.write("go\n")
            child.stdin.flush()
            answer = json.loads(child.stdout.readline())
            return answer["seconds"], answer["cpu"], [answer["first"]]

    for run in runners.values():  # load and warm up
        run(texts[: args.batch])

    rates: dict[str, list[float]] = {name: [] for name in runners}
    per_cpu: dict[str, list[float]] = {name: [] for name in runners}
    if child:
        rates["pytorch (sentence-transformers)"] = []
        per_cpu["pytorch (sentence-transformers)"] = []
    reference = None
    firsts = {}
    for _ in range(args.rounds):
        for name, run in runners.items():
            seconds, cpu, vectors = timed(run, texts, args.batch)
            rates[name].append(len(texts) / seconds)
            per_cpu[name].append(len(texts) / cpu)
            firsts[name] = vectors[0]
            if name == "onnx, this version":
                reference = vectors
        if child:
            seconds, cpu, vectors = torch_round()
            rates["pytorch (sentence-transformers)"].append(len(texts) / seconds)
            per_cpu["pytorch (sentence-transformers)"].append(len(texts) / cpu)
            firsts["pytorch (sentence-transformers)"] = vectors[0]
    if child:
        child.stdin.close()
        child.wait()
    print(
        f"{len(texts)} SciFact passages cut to {args.chars} characters, batches of {args.batch}, "
        f"{args.threads} threads, {args.rounds} interleaved rounds; load average {os.getloadavg()[0]:.1f}"
    )
    print(
        "| runner | passages/s per round | median | per CPU second, median "
        "| cosine of the first vector with this version's |"
    )
    print("|---|---|---|---|---|")
    for name, values in rates.items():
        similarity = cosine(firsts[name], reference[0])
        print(
            f"| {name} | {' / '.join(f'{v:.1f}' for v in values)} | {statistics.median(values):.1f} "
            f"| {statistics.median(per_cpu[name]):.1f} | {similarity:.4f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
