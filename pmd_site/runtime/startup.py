"""A process's start-up, made cheaper: standard library only, imported first by the `pmd` command."""

from __future__ import annotations

import contextlib
import gc

_state = {"paused": False, "frozen": False}


@contextlib.contextmanager
def collector_paused_while_starting(*, process_ends_after: bool):
    """Start-up (imports, Django's app registry) makes a great many objects and frees almost none:
    the garbage collector's passes over them are wasted time, about a quarter of a `pmd search`.
    Collecting is paused for the block or until Django is set up, whichever ends first; what
    start-up made is then frozen (gc.freeze): it lives as long as the process, and neither later
    passes nor the last one at exit need to look at it again.

    `process_ends_after`: the block is the whole program (the `pmd` command). Otherwise (main()
    called inside tests or scripts) everything is as it was when the block ends."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    _state["paused"] = True
    try:
        yield
    finally:
        start_up_over()
        if _state["frozen"] and not process_ends_after:
            _state["frozen"] = False
            gc.unfreeze()


def start_up_over() -> None:
    """What runs from here on frees what it makes: collect again (if start-up paused collecting)."""
    if _state["paused"]:
        _state["paused"] = False
        gc.freeze()
        _state["frozen"] = True
        gc.enable()
