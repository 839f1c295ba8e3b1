#!/usr/bin/env python3
"""Time note parsing on pathological notes of size n and 2n, side by side.

What a scan does with one note's bytes: frontmatter and title (indexing.text.parse_markdown),
tags, date and links (indexing.structure.note_structure) and chunks (indexing.chunking).
Each shape is timed at n and at 2n bytes in a child process with a time and memory limit,
so the table shows whether the cost grows like the note (ratio about 2) or faster.

    .venv/bin/python scripts/bench/parsing.py [--scale 1.0] [--timeout 60] [--only SHAPE]

No database and no Django settings: these are pure functions of the text.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from indexing.chunking import chunk_markdown  # noqa: E402 - once the repository is on sys.path
from indexing.structure import note_structure  # noqa: E402 - once the repository is on sys.path
from indexing.text import parse_markdown  # noqa: E402 - once the repository is on sys.path

MEMORY_LIMIT = 2 * 1024**3

PROSE = "The quick brown fox jumps over the lazy dog. It was not amused. "


def _fill(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


def _wikilinks(n: int) -> str:
    return _fill("see [[Note a]] and ", n) + "\n"


def _mixed_links(n: int) -> str:
    return _fill("[[Note b]] [text](other.md) ", n) + "\n"


def _whitespace_line(n: int) -> str:
    prose = _fill(PROSE, 8000)
    return f"# Spaces\n\n{prose}\n{' ' * n}x\n\n{prose}\n"


def _nested_list(n: int) -> str:
    lines, size, depth = [], 0, 0
    while size < n:
        line = "  " * depth + f"- item {depth}\n"
        lines.append(line)
        size += len(line)
        depth += 1
    return "".join(lines)


def _code_spans(n: int) -> str:
    return "`open " + _fill("``pair`` ", n) + "\n"


def _open_comments(n: int) -> str:
    return _fill("<!-- never closed ", n) + "\n"


def _heading_spaces(n: int) -> str:
    return "# a" + " " * n + "b\n"


def _many_fences(n: int) -> str:
    return _fill("```\ncode\n```\n", n)


def _long_word(n: int) -> str:
    return "a" * n + "\n"


def _alias_bomb(n: int) -> str:
    """YAML aliases 10 wide and about n/52 levels deep (7 levels is 455 bytes)."""
    levels = max(1, round(n / 52))
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "---\n" + "\n".join(lines) + "\n---\n\nbody text [[Other]]\n"


SHAPES = {
    "wikilinks on one line": (_wikilinks, 100_000),
    "markdown + wikilinks": (_mixed_links, 100_000),
    "line of spaces": (_whitespace_line, 100_000),
    "nested list": (_nested_list, 1_000_000),
    "inline code runs": (_code_spans, 100_000),
    "unclosed comments": (_open_comments, 200_000),
    "heading of spaces": (_heading_spaces, 200_000),
    "many code fences": (_many_fences, 2_000_000),
    "one long word": (_long_word, 2_000_000),
    "YAML alias bomb": (_alias_bomb, 260),
}


def run_one(shape: str, n: int) -> dict:
    text = SHAPES[shape][0](n)
    raw = text.encode()
    started = time.perf_counter()
    parsed = parse_markdown(raw, "bench.md")
    structure = note_structure(parsed.body, parsed.frontmatter, "bench.md", 0.0)
    chunks = chunk_markdown(parsed.body)
    elapsed = time.perf_counter() - started
    return {
        "bytes": len(raw),
        "seconds": elapsed,
        "links": len(structure.links),
        "chunks": len(chunks),
        "warnings": len(parsed.warnings) + len(getattr(structure, "warnings", [])),
    }


def _child(shape: str, n: int, timeout: float) -> dict:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    try:
        out = subprocess.run(
            [sys.executable, __file__, "--child", shape, str(n)],
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=limit,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        return {"error": f">{timeout:g} s"}
    if out.returncode:
        last = (out.stderr.strip().splitlines() or ["failed"])[-1]
        return {"error": "MemoryError" if "MemoryError" in last else last[:40]}
    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every n by this")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds allowed per note")
    parser.add_argument("--only", action="append", help="shape name(s) to run")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child[0], int(args.child[1]))))
        return 0

    def cell(r: dict) -> str:
        return r.get("error") or f"{r['seconds']:.3f} s"

    print(f"{'shape':<24} {'n bytes':>10} {'time n':>10} {'2n bytes':>10} {'time 2n':>10} {'ratio':>6}  result at 2n")
    for shape, (_, base) in SHAPES.items():
        if args.only and shape not in args.only:
            continue
        n = max(1, int(base * args.scale))
        make = SHAPES[shape][0]
        one, two = _child(shape, n, args.timeout), _child(shape, 2 * n, args.timeout)
        one.setdefault("bytes", len(make(n).encode()))
        two.setdefault("bytes", len(make(2 * n).encode()))
        ratio = (
            f"{two['seconds'] / max(one['seconds'], 1e-6):.1f}" if "error" not in one and "error" not in two else "-"
        )
        result = "" if "error" in two else f"{two['links']} links, {two['chunks']} chunks, {two['warnings']} warnings"
        print(
            f"{shape:<24} {one['bytes']:>10,} {cell(one):>10} {two['bytes']:>10,} {cell(two):>10} {ratio:>6}  {result}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
