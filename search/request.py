"""The one search request object every adapter (CLI, API, web, MCP, bench) builds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI builds its parser from this module before Django is set up
    from indexing.access import Access
    from search.filters import SearchFilters

DEFAULT_LIMIT = 5
DEFAULT_LIMIT_MACHINE = 20  # --json / --files: scripts want more than a screenful
ALL_LIMIT = 100_000


class Mode:
    """The three search modes, in the user's words."""

    KEYWORD = "keyword"
    VECTOR = "vector"
    HYBRID = "hybrid"
    ALL = (KEYWORD, VECTOR, HYBRID)


# The CLI verb of each mode. It is also the mode's name in every answer (`"mode": "search"` in
# JSON, XML, the API and MCP), as it has been since the first release.
MODE_VERBS = {Mode.KEYWORD: "search", Mode.VECTOR: "vsearch", Mode.HYBRID: "query"}
# The one table of names callers may use for a mode: the CLI verbs, the web UI's names and synonyms.
MODE_ALIASES = {
    **{mode: mode for mode in Mode.ALL},
    **{verb: mode for mode, verb in MODE_VERBS.items()},
    "lex": Mode.KEYWORD,
    "bm25": Mode.KEYWORD,
    "semantic": Mode.VECTOR,
    "vec": Mode.VECTOR,
    "deep": Mode.HYBRID,
}


def mode_normalize(name: str | None) -> str:
    """The Mode a caller's name stands for (any alias, any case); ValueError for an unknown name."""
    text = (name or Mode.KEYWORD).strip().lower()
    try:
        return MODE_ALIASES[text]
    except KeyError:
        raise ValueError(f"unknown search mode '{text}': use one of {', '.join(MODE_VERBS.values())}") from None


def mode_verb(mode: str) -> str:
    """The name a mode goes by in answers and on the command line (`search`, `vsearch`, `query`)."""
    return MODE_VERBS[mode_normalize(mode)]


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
    # optional hybrid ranking signals (search.pipeline.signals); None: PMD_LINK_BOOST / PMD_RECENCY_BOOST
    link_boost: float | None = None
    recency_boost: float | None = None
    # typed searches (kind, text) with kind lex | vec | hyde, written by the caller instead of expansion
    searches: list[tuple[str, str]] = field(default_factory=list)
    # who is searching (indexing.access): decides which collections are read. Required: search_run
    # refuses a request without one rather than read everything.
    access: Access | None = None
    # structured filters (search.filters): merged by search_run with those written in `query`,
    # after which `query` holds only the words to search and `filters` everything to apply
    filters: SearchFilters | None = None
    sort: str = "relevance"  # relevance | date (newest first)
    # False: search the words as written ("search instead for …"), no typo correction
    correct: bool = True
    # the face asking (cli, api, web, mcp): the search is logged (indexing.services.search_log); "" is not
    face: str = ""
    # read "last week", "yesterday", "recent" in the words as a date filter (PMD_TIME_WORDS too)
    time_words: bool = True
    # the words are being typed (the web box as you type): in keyword search the last word, when no
    # note holds it whole, matches as a prefix (search.retrieval.spelling.typed_prefix)
    typing: bool = False

    def effective_limit(self, *, machine_format: bool = False) -> int:
        if self.all:
            return ALL_LIMIT
        if self.limit is not None:
            return max(1, self.limit)
        return DEFAULT_LIMIT_MACHINE if machine_format else DEFAULT_LIMIT
