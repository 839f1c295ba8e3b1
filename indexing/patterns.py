"""Regular expressions compiled when first used, not when their module is imported.

Python compiles a pattern with Python code (re._compiler): the module-level patterns of what a
`pmd search` imports cost it several milliseconds of start-up, most of them for text a search of
plain notes never meets (frontmatter, callouts, links and emphasis in a snippet, page markers).
"""

from __future__ import annotations

import re


class LazyPattern:
    """Stands in for `re.compile(pattern, flags)`, compiled at the first attribute used. Each attribute
    is then kept on the instance, so later uses cost what they cost on the compiled pattern."""

    def __init__(self, pattern: str, flags: int = 0):
        self._arguments = (pattern, flags)

    def __getattr__(self, name: str):
        if name == "_arguments":  # not set yet (a copy made without __init__)
            raise AttributeError(name)
        value = getattr(re.compile(*self._arguments), name)
        self.__dict__[name] = value
        return value

    def __repr__(self) -> str:
        return f"LazyPattern({self._arguments[0]!r}, {self._arguments[1]!r})"
