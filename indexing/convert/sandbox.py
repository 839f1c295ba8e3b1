"""Converting files in a child process with a time and a memory limit: a converter that hangs,
crashes or swells ends there, as a problem with its reason, and the scan goes on.

One child converts a scan's files one after another (its start and the libraries' import cost
about half a second, more than most files); a child that fails, is stopped at its time limit or
has converted RECYCLE_AFTER files is replaced by a new one for the next file."""

from __future__ import annotations

import json
import os
import selectors
import signal
import struct
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable

from indexing.convert import ConversionRefused, Limits

RECYCLE_AFTER = 200  # files one child converts before a fresh one takes over (memory a library kept)
_LENGTH = struct.Struct(">Q")


@dataclass(frozen=True)
class SandboxLimits:
    seconds: float = 60.0
    memory_mb: int = 1024
    limits: Limits = Limits()
    progress_seconds: float = 1.0  # how often a long file's reading reports the page it is on


UnitsCallback = Callable[[int, int], None]  # (pages read, pages) of the file being converted


@dataclass
class Extracted:
    text: str
    units: int
    warnings: list[str]
    peak_mb: float = 0.0  # the child's peak resident memory so far
    key: str = ""  # the Extraction it is stored as (indexing.services.converting)


class Converter:
    """A child process converting files (`python -m indexing.convert.child`); a context manager."""

    def __init__(self, sandbox: SandboxLimits = SandboxLimits(), *, on_units: UnitsCallback | None = None):
        self.sandbox = sandbox
        self.on_units = on_units
        self.process: subprocess.Popen | None = None
        self.served = 0

    def __enter__(self) -> "Converter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:  # a scan that failed midway: its child reads the end of its input and exits
        if self.process is not None:
            self._stop()

    def _start(self) -> subprocess.Popen:
        command = [
            sys.executable,
            "-m",
            "indexing.convert.child",
            str(self.sandbox.memory_mb),
            json.dumps(asdict(self.sandbox.limits)),
            str(self.sandbox.progress_seconds),
        ]
        self.served = 0
        return subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
        )  # its own group: stopped whole

    def close(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        try:
            process.stdin.close()
            process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()
        finally:
            process.stdout.close()

    def _stop(self) -> int | None:
        process, self.process = self.process, None
        if process is None:
            return None
        try:
            os.killpg(process.pid, signal.SIGKILL)  # the child and what it started (tesseract)
        except OSError:
            process.kill()
        code = process.wait()
        for stream in (process.stdin, process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        return code

    def convert(self, fmt: str, data: bytes) -> Extracted:
        """The file's markdown-like text, or ConversionRefused with the reason."""
        if self.process is None or self.process.poll() is not None or self.served >= RECYCLE_AFTER:
            self.close()
            self.process = self._start()
        self.served += 1
        deadline = time.monotonic() + self.sandbox.seconds
        header = json.dumps({"format": fmt}).encode()
        try:
            self.process.stdin.write(_LENGTH.pack(len(header)) + header + _LENGTH.pack(len(data)))
            self.process.stdin.write(data)
            self.process.stdin.flush()
            answer = self._read_answer(deadline)
        except BrokenPipeError:
            answer = None
        if answer is None:
            if time.monotonic() >= deadline:
                self._stop()
                raise ConversionRefused(
                    f"reading it took more than {self.sandbox.seconds:g} s (PMD_CONVERT_SECONDS): stopped"
                )
            code = self._stop()
            raise ConversionRefused(
                f"the converter stopped ({f'signal {-code}' if code and code < 0 else f'exit {code}'}; "
                f"over the {self.sandbox.memory_mb} MB memory limit, PMD_CONVERT_MEMORY_MB, or a crash)"
            )
        if "refused" in answer:
            raise ConversionRefused(answer["refused"])
        return Extracted(
            text=answer["text"],
            units=int(answer.get("units") or 0),
            warnings=list(answer.get("warnings") or []),
            peak_mb=float(answer.get("peak_mb") or 0),
        )

    def _read_answer(self, deadline: float) -> dict | None:
        """The child's next answer, or None when it ended or the deadline passed first; its progress
        frames on the way go to `on_units`."""
        fd = self.process.stdout.fileno()
        buffer = bytearray()
        wanted = None
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                if wanted is None and len(buffer) >= _LENGTH.size:
                    wanted = _LENGTH.size + _LENGTH.unpack(bytes(buffer[: _LENGTH.size]))[0]
                if wanted is not None and len(buffer) >= wanted:
                    frame = json.loads(bytes(buffer[_LENGTH.size : wanted]).decode("utf-8", "surrogatepass"))
                    if "units_read" not in frame:
                        return frame
                    del buffer[:wanted]
                    wanted = None
                    if self.on_units is not None:
                        self.on_units(int(frame["units_read"]), int(frame["units"]))
                    continue
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(timeout=left):
                    return None
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return None
                buffer += chunk


def convert_isolated(fmt: str, data: bytes, sandbox: SandboxLimits) -> Extracted:
    """One file in a child of its own (tests, one-off conversions)."""
    with Converter(sandbox) as converter:
        return converter.convert(fmt, data)
