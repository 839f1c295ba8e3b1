"""Converted fixture files, each converted once per test run: the database (and with it the stored
text) is rolled back after every test, the child process would convert the same bytes again."""

from __future__ import annotations

from pathlib import Path

FORMAT_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
_CONVERTED: dict = {}


def convert_once(monkeypatch) -> None:
    from indexing.services import converting

    real = converting.convert_isolated

    def once(fmt, data, limits):
        key = (fmt, data, limits)
        if key not in _CONVERTED:
            _CONVERTED[key] = real(fmt, data, limits)
        return _CONVERTED[key]

    monkeypatch.setattr(converting, "convert_isolated", once)
