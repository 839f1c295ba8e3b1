"""The search service's one door: what the faces (CLI, API, web UI, MCP, tasks, reports) may use.

`from search import search_run, SearchRequest, render` rather than reaching into `search.pipeline`
or `search.retrieval`: those are the service's insides, free to change behind this door (an
import-linter contract keeps the faces out of them).

The names load on first use (PEP 562), not when the package is imported: `search` is a Django
app, imported while Django loads its apps, before the models the pipeline reads may be imported;
and the CLI builds its parser from `search.request` before Django is set up, which must stay cheap.
Each use reads the name from its module, so a test that patches it there is seen through the door.
"""

from __future__ import annotations

import importlib

# Each public name and the module that holds it.
_DOOR = {
    # searching: the one entry, whatever the mode, and the request every face builds
    "search_run": "search.pipeline.dispatch",
    "SearchRequest": "search.request",
    "Mode": "search.request",
    "MODE_ALIASES": "search.request",
    "DEFAULT_LIMIT_MACHINE": "search.request",
    "mode_normalize": "search.request",
    "mode_verb": "search.request",
    "SearchResult": "search.results",
    "query_suggestions": "search.retrieval.suggest",
    # the filters a face builds from its options
    "SearchFilters": "search.filters",
    "filters_from_options": "search.filters",
    "TYPE_NAMES": "search.filters",
    "frontmatter_fields": "search.retrieval.filters",
    # history, related notes, saved searches
    "history_search": "search.pipeline.history",
    "HistoryRequest": "search.retrieval.history",
    "related_notes": "search.retrieval.related",
    "saved_search_run": "search.pipeline.saved",
    "saved_search_dict": "search.pipeline.saved",
    "saved_searches_listed": "search.pipeline.saved",
    "saved_searches_digest": "search.pipeline.saved",
    # asking the notes a question
    "AskRequest": "search.pipeline.answer",
    "ask_open": "search.pipeline.answer",
    "ask_run": "search.pipeline.answer",
    "answer_from_record": "search.pipeline.answer",
    "answer_model": "search.pipeline.answer",
    # the model server as search sees it: the re-rank method, the models found missing
    "describe_method": "search.pipeline.rerank",
    "absent_models": "search.pipeline.absent",
    # rendering an answer, for every face and format
    "render": "search.formatters",
    "format_response": "search.formatters",
    "MACHINE_FORMATS": "search.formatters",
    "json_text": "search.formatters",
    "terminal_text": "search.formatters",
    "numbered_lines": "search.formatters",
    "marked": "search.formatters",
    "shows_dates": "search.formatters",
    "ask_sse": "search.formatters.ask",
    "sse_event": "search.formatters.ask",
    # the shapes the API and the MCP tools answer with
    "AskBrief": "search.schemas",
    "AskOut": "search.schemas",
    "ChangedFileBrief": "search.schemas",
    "CommitBrief": "search.schemas",
    "FieldsOut": "search.schemas",
    "FiltersIn": "search.schemas",
    "StrictIn": "search.schemas",
    "HistoryBrief": "search.schemas",
    "HistoryOut": "search.schemas",
    "LinkBrief": "search.schemas",
    "LinksBrief": "search.schemas",
    "LinksOut": "search.schemas",
    "MultiGetBrief": "search.schemas",
    "MultiGetOut": "search.schemas",
    "RelatedBrief": "search.schemas",
    "RelatedNoteBrief": "search.schemas",
    "RelatedOut": "search.schemas",
    "ResultBrief": "search.schemas",
    "SearchBrief": "search.schemas",
    "SearchOut": "search.schemas",
    "SubSearch": "search.schemas",
}

__all__ = sorted(_DOOR)


def __getattr__(name: str):
    try:
        module = _DOOR[name]
    except KeyError:
        raise AttributeError(f"module 'search' has no attribute {name!r}") from None
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_DOOR))
