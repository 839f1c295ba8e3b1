"""Reads: every query a face makes of the index, one module per part; every name is importable from here.

Document bodies always come from the database, never from the file system, so no
reference (`../`, absolute paths, symlinks) can read a file outside the index.
"""

from indexing.selectors.activity import Activity, activity_since, notes_activity
from indexing.selectors.answers import answer_costs, answers_recent, conversation_answers
from indexing.selectors.collections import (
    OVERVIEW_FIELDS,
    CollectionDetail,
    collection_detail,
    collection_sharing,
    collections_overview,
    context_list,
    contexts_for,
)
from indexing.selectors.documents import (
    DocumentPage,
    ResolvedDocument,
    _visible_documents,
    close_matches,
    document_lines,
    document_page,
    document_resolve,
    documents_list,
)
from indexing.selectors.multi_get import (
    DEFAULT_MULTI_GET_MAX_BYTES,
    MULTI_GET_MAX_REFERENCES,
    MultiGetItem,
    MultiGetResult,
    documents_multi_get,
    multi_get_limits,
)
from indexing.selectors.search_log import (
    SLOW_MS,
    WEAK_SCORE,
    search_feedback_rows,
    search_log_report,
    search_log_visible_to,
)
from indexing.selectors.sections import SectionText, sections_at
from indexing.selectors.status import index_counts, index_jobs_running, jobs_visible_to

__all__ = [
    "Activity",
    "activity_since",
    "DEFAULT_MULTI_GET_MAX_BYTES",
    "MULTI_GET_MAX_REFERENCES",
    "OVERVIEW_FIELDS",
    "SLOW_MS",
    "WEAK_SCORE",
    "CollectionDetail",
    "DocumentPage",
    "MultiGetItem",
    "MultiGetResult",
    "ResolvedDocument",
    "SectionText",
    "_visible_documents",
    "answer_costs",
    "notes_activity",
    "answers_recent",
    "close_matches",
    "collection_detail",
    "collection_sharing",
    "collections_overview",
    "context_list",
    "contexts_for",
    "conversation_answers",
    "document_lines",
    "document_page",
    "document_resolve",
    "documents_list",
    "documents_multi_get",
    "index_counts",
    "index_jobs_running",
    "jobs_visible_to",
    "multi_get_limits",
    "search_feedback_rows",
    "search_log_report",
    "search_log_visible_to",
    "sections_at",
]
