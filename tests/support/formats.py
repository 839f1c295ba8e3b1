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


def formats_collection(
    folder: Path,
    name: str,
    files: tuple[str, ...],
    formats: list[str],
    monkeypatch,
    *,
    extra: dict[str, str] | None = None,
):
    """A collection `name` in `folder` holding these fixture files (and `extra` notes), indexed."""
    import shutil

    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    convert_once(monkeypatch)
    folder.mkdir()
    for file in files:
        shutil.copy(FORMAT_FIXTURES / file, folder / file)
    for file, text in (extra or {}).items():
        (folder / file).write_text(text)
    collection = collection_create(path=folder, name=name, formats=formats)
    collection_index(collection)
    return collection
