"""Text PostgreSQL cannot store, refused before it reaches SQL.

A NUL byte is refused in any text column or parameter, and half a UTF-16 surrogate pair (which
JSON can spell as `\\ud800`) cannot even be encoded for the database. Each face passes the
input of a request through `refuse_unstorable` once, where it has it parsed (the API's
validated parameters, the web UI's URL, query and form, an MCP tool's arguments, the CLI's
arguments), so no check is sprinkled over the services.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from indexing.errors import InvalidText

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable_reason(text: str) -> str | None:
    """Why the database cannot store `text`, or None when it can."""
    match = _UNSTORABLE.search(text)
    if match is None:
        return None
    return "a NUL byte" if match.group() == "\x00" else "an unpaired surrogate (not a character)"


def refuse_unstorable(values: Mapping[str, object]) -> None:
    """Raise InvalidText naming the first parameter (`filters.tags`, `path`) whose text, or a key
    or item of it, the database cannot store. Walks strings, mappings and sequences; other
    objects (numbers, files, a context) are not text and are left alone."""
    for name, value in values.items():
        _check(value, str(name))


def _check(value: object, where: str) -> None:
    if isinstance(value, str):
        reason = unstorable_reason(value)
        if reason:
            raise InvalidText(f"'{where}' contains {reason}, which cannot be searched or stored")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            name = f"{where}.{key}" if isinstance(key, str) and unstorable_reason(key) is None else where
            _check(key, name)
            _check(item, name)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            _check(item, where)
