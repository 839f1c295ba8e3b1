"""Models the model server does not have, remembered per process for a while.

A stock server without the expansion or re-rank model answers 404 to every query's request:
asked each time, each query paid for the request (and for preparing the re-ranker's input) and
carried the same warnings. Once a model is found missing, its stage is skipped without a word
until PMD_MISSING_MODEL_RECHECK seconds have passed; `--explain` says why in one line.
"""

from __future__ import annotations

import threading
import time

from django.conf import settings

_absent: dict[tuple[str, str], tuple[float, str]] = {}  # (stage, model) -> (ask again at, reason)
_lock = threading.Lock()


def model_absent(stage: str, model: str) -> str | None:
    """Why `stage` skips `model` now (None: ask the server)."""
    with _lock:
        entry = _absent.get((stage, model))
        if entry is None or entry[0] <= time.monotonic():
            _absent.pop((stage, model), None)
            return None
        return entry[1]


def remember_absent(stage: str, model: str, reason: str) -> None:
    recheck = max(0.0, float(settings.PMD_MISSING_MODEL_RECHECK))
    if recheck:
        with _lock:
            _absent[(stage, model)] = (time.monotonic() + recheck, reason)


def forget_absent() -> None:
    """Ask again at the next query (a model was pulled; tests)."""
    with _lock:
        _absent.clear()


def absent_models() -> dict[str, tuple[str, str]]:
    """Stage -> (model, reason) for each model this process found missing and skips now (status)."""
    now = time.monotonic()
    with _lock:
        return {stage: (model, reason) for (stage, model), (until, reason) in _absent.items() if until > now}
