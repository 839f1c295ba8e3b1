"""The converting process: `python -m indexing.convert.child MEMORY_MB LIMITS_JSON` converts the
files it is sent one after another (indexing.convert.sandbox holds the other end). It imports no
Django. Its memory is limited while it reads a file (the soft RLIMIT_AS); a format's library is
loaded, on its first file, with the limit lifted, so the limit bounds what reading files costs.

Each request on standard input: an 8-byte big-endian length and that much JSON header
({"format": …}), then an 8-byte length and the file's bytes. Each answer on standard output: an
8-byte length and that much JSON: {"text", "units", "warnings", "peak_mb"}, or {"refused": reason};
before it, while a long file is read, progress frames {"units_read": n, "units": m} at most every
PROGRESS_SECONDS (the third argument)."""

from __future__ import annotations

import json
import resource
import struct
import sys
import time

import indexing.convert
from indexing.convert import ConversionRefused, Limits, convert_here, preload

_LENGTH = struct.Struct(">Q")


def _read_exact(stream, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_frame(stream) -> bytes | None:
    head = _read_exact(stream, _LENGTH.size)
    return None if head is None else _read_exact(stream, _LENGTH.unpack(head)[0])


_loaded: set[str] = set()


def _load(fmt: str, memory_mb: int) -> None:
    """Import a format's converter and library without the memory limit, then set it again."""
    if fmt in _loaded:
        return
    _loaded.add(fmt)
    if memory_mb > 0:
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    try:
        preload(fmt)
    finally:
        if memory_mb > 0:
            cap = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def answer_for(fmt: str, data: bytes, limits, memory_mb: int) -> dict:
    try:
        converted = convert_here(fmt, data, limits)
    except ConversionRefused as exc:
        return {"refused": str(exc)}
    except MemoryError:
        return {"refused": f"needed more than {memory_mb} MB of memory to read (PMD_CONVERT_MEMORY_MB)"}
    except RecursionError:
        return {"refused": "nested too deep to read"}
    except Exception as exc:  # noqa: BLE001 - a converter's library failing on a broken file refuses that file only
        if isinstance(exc, OSError) and ("map" in str(exc) or "memory" in str(exc).lower()):
            return {"refused": f"needed more than {memory_mb} MB of memory to read (PMD_CONVERT_MEMORY_MB)"}
        return {"refused": f"could not be read ({type(exc).__name__}: {str(exc)[:200]})"}
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "text": converted.markdown(),
        "units": converted.units,
        "warnings": converted.warnings,
        "peak_mb": round(peak_mb, 1),
    }


def _write(stdout, answer: dict) -> None:
    frame = json.dumps(answer, ensure_ascii=False).encode("utf-8", "surrogatepass")
    stdout.write(_LENGTH.pack(len(frame)) + frame)
    stdout.flush()


class _UnitProgress:
    """The converter's `unit_read` calls, passed on as progress frames, no more often than `every` seconds."""

    def __init__(self, stdout, every: float):
        self.stdout, self.every, self.last = stdout, every, 0.0

    def start(self) -> None:
        self.last = time.monotonic()  # a file read within `every` seconds sends no progress at all

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            _write(self.stdout, {"units_read": done, "units": total})


def main() -> int:
    memory_mb = int(sys.argv[1])
    limits_json = sys.argv[2] if len(sys.argv) > 2 else "{}"
    progress_seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    if memory_mb > 0:
        cap = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap, resource.getrlimit(resource.RLIMIT_AS)[1]))
    limits = Limits(**json.loads(limits_json))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    progress = indexing.convert.unit_hook = _UnitProgress(stdout, progress_seconds)
    while True:
        header = _read_frame(stdin)
        if header is None:
            return 0
        data = _read_frame(stdin)
        if data is None:
            return 0
        fmt = json.loads(header)["format"]
        _load(fmt, memory_mb)
        progress.start()
        answer = answer_for(fmt, data, limits, memory_mb)
        del data
        _write(stdout, answer)


if __name__ == "__main__":
    sys.exit(main())
