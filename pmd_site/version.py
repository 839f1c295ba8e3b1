"""pmd's version, named once in pyproject.toml.

A checkout reads it there (an editable install's metadata keeps the version it was installed at);
an installed package reads its own metadata."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path


def _version() -> str:
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        with open(pyproject, "rb") as handle:
            project = tomllib.load(handle).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        project = {}
    if project.get("name") == "pmd" and project.get("version"):
        return project["version"]
    try:
        return metadata.version("pmd")
    except metadata.PackageNotFoundError:
        return "unknown"


VERSION = _version()
