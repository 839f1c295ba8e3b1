"""The search pipeline: `search_run` is the one entry every face calls, whatever the mode.

Keyword and vector searches go straight to retrieval; a hybrid query expands the query,
retrieves in parallel, fuses the lists and re-ranks, each stage bounded by a deadline.
"""

from search.pipeline.dispatch import search_run
from search.pipeline.hybrid import hybrid_search

__all__ = ["hybrid_search", "search_run"]
