"""Converting a file in a child process with a time and a memory limit: a converter that hangs,
crashes or swells ends there, as a problem with its reason, and the scan goes on."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, dataclass

from indexing.convert import ConversionRefused, Limits


@dataclass(frozen=True)
class SandboxLimits:
    seconds: float = 60.0
    memory_mb: int = 1024
    limits: Limits = Limits()


@dataclass
class Extracted:
    text: str
    units: int
    warnings: list[str]


def convert_isolated(fmt: str, data: bytes, sandbox: SandboxLimits) -> Extracted:
    """The file's markdown-like text, converted by `python -m indexing.convert.child`."""
    command = [sys.executable, "-m", "indexing.convert.child", fmt, str(sandbox.memory_mb),
               json.dumps(asdict(sandbox.limits))]
    try:
        done = subprocess.run(command, input=data, capture_output=True, timeout=sandbox.seconds, check=False)
    except subprocess.TimeoutExpired:
        raise ConversionRefused(f"reading it took more than {sandbox.seconds:g} s (PMD_CONVERT_SECONDS): "
                                "stopped") from None
    try:
        answer = json.loads(done.stdout.decode("utf-8", "surrogatepass") or "null")
    except ValueError:
        answer = None
    if isinstance(answer, dict) and "refused" in answer:
        raise ConversionRefused(answer["refused"])
    if done.returncode != 0 or not isinstance(answer, dict):
        if done.returncode < 0 or b"MemoryError" in done.stderr or b"std::bad_alloc" in done.stderr:
            raise ConversionRefused(f"the converter stopped (signal {-done.returncode}, or over the "
                                    f"{sandbox.memory_mb} MB memory limit, PMD_CONVERT_MEMORY_MB)"
                                    if done.returncode < 0 else
                                    f"needed more than {sandbox.memory_mb} MB of memory to read (PMD_CONVERT_MEMORY_MB)")
        last = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"])[-1][:200]
        raise ConversionRefused(f"the converter failed ({last})")
    return Extracted(text=answer["text"], units=int(answer.get("units") or 0), warnings=list(answer.get("warnings") or []))
