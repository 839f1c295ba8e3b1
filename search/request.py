"""The one search request object every adapter (CLI, API, web, MCP, bench) builds."""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_LIMIT = 5
DEFAULT_LIMIT_MACHINE = 20  # --json / --files: scripts want more than a screenful
ALL_LIMIT = 100_000


class Mode:
    KEYWORD = "search"
    VECTOR = "vsearch"
    HYBRID = "query"
    ALL = (KEYWORD, VECTOR, HYBRID)


@dataclass
class SearchRequest:
    query: str
    mode: str = Mode.KEYWORD
    limit: int | None = None  # None: DEFAULT_LIMIT, or DEFAULT_LIMIT_MACHINE for machine formats
    all: bool = False
    min_score: float = 0.0
    collections: list[str] = field(default_factory=list)
    full: bool = False
    line_numbers: bool = False
    hits_per_document: int = 1
    # hybrid pipeline
    expand: bool = True
    rerank: bool = True
    candidate_limit: int = 40
    intent: str | None = None
    explain: bool = False

    def effective_limit(self, *, machine_format: bool = False) -> int:
        if self.all:
            return ALL_LIMIT
        if self.limit is not None:
            return max(1, self.limit)
        return DEFAULT_LIMIT_MACHINE if machine_format else DEFAULT_LIMIT
