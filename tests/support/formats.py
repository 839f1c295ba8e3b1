"""Converted fixture files, each converted once per test run: the database (and with it the stored
text) is rolled back after every test, the child process would convert the same bytes again."""

from __future__ import annotations

from pathlib import Path

FORMAT_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
_CONVERTED: dict = {}


def convert_once(monkeypatch) -> None:
    from indexing.convert.sandbox import Converter

    real = Converter.convert

    def once(self, fmt, data):
        key = (fmt, data, self.sandbox)
        if key not in _CONVERTED:
            _CONVERTED[key] = real(self, fmt, data)
        return _CONVERTED[key]

    monkeypatch.setattr(Converter, "convert", once)
