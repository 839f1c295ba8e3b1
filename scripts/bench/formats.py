"""Conversion speed and memory per format (indexing/convert), on a folder of real files:

    .venv/bin/python scripts/bench/formats.py FOLDER [--in-process]

Each file is converted as the scan converts it: by one child process with the default limits,
file after file (--in-process: in this one). Prints, per format, files, pages
(slides, sheets, chapters), MB, seconds, pages/s, MB/s and the peak memory (RSS) of a child."""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from indexing.convert import ConversionRefused, Limits, convert_here, format_of, is_converted
from indexing.convert.sandbox import Converter, SandboxLimits


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--in-process", action="store_true")
    args = parser.parse_args()
    rows: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0, 0.0, 0])  # files, units, bytes, seconds, refused
    peaks: dict[str, int] = {}
    converter = Converter(SandboxLimits())  # one child for the run, as a scan has
    for path in sorted(Path(args.folder).rglob("*")):
        if not path.is_file() or not is_converted(path.name):
            continue
        fmt = format_of(path.name)
        data = path.read_bytes()
        started = time.perf_counter()
        try:
            if args.in_process:
                units = convert_here(fmt, data, Limits()).units
            else:
                done = converter.convert(fmt, data)
                units = done.units
                peaks[fmt] = max(peaks.get(fmt, 0), int(done.peak_mb * 1024))
        except ConversionRefused as exc:
            print(f"{path.name}: refused: {exc}", file=sys.stderr)
            rows[fmt][4] += 1
            units = 0
        elapsed = time.perf_counter() - started
        row = rows[fmt]
        row[0] += 1
        row[1] += units
        row[2] += len(data)
        row[3] += elapsed
    converter.close()
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("| format | files | pages | MB | seconds | pages/s | MB/s | peak memory |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for fmt, (files, units, size, seconds, refused) in sorted(rows.items()):
        peak = own if args.in_process else peaks.get(fmt, 0)
        print(
            f"| {fmt} | {files:.0f}{f' ({refused:.0f} refused)' if refused else ''} | {units:.0f} | "
            f"{size / 1e6:.2f} | {seconds:.2f} | {units / seconds:.1f} | {size / 1e6 / seconds:.2f} | "
            f"{peak / 1024:.0f} MB |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
