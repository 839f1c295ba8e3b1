"""pmd's version, named once in pyproject.toml.

A checkout reads it there (an editable install's metadata keeps the version it was installed at);
an installed package reads its own metadata. The line is found with a pattern, not a TOML parser:
every command reads the version, and a search should load no more than it needs."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

_PROJECT_VERSION = re.compile(r'^\[project\]\s*$(?:(?!^\[).)*?^version\s*=\s*"([^"]+)"', re.M | re.S)
_PROJECT_NAME = re.compile(r'^\[project\]\s*$(?:(?!^\[).)*?^name\s*=\s*"pmd"', re.M | re.S)


def _version() -> str:
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = ""
    found = _PROJECT_VERSION.search(text)
    if found and _PROJECT_NAME.search(text):
        return found.group(1)
    try:
        return metadata.version("pmd")
    except metadata.PackageNotFoundError:
        return "unknown"


VERSION = _version()
