"""The browser UI's views, one module per area; pmd_site/web/urls.py routes to the names exported here.

Views parse input (pmd_site.web.forms), call one service or selector, and render a template.
htmx requests that target a fragment get the fragment only; everything else gets the full
page, so every URL can be shared, reloaded and used without JavaScript. A service's PmdError
is shown by the one mapping in pmd_site.web.errors.
"""

from pmd_site.web.views.ask import ask_forget, ask_stream
from pmd_site.web.views.collections import (
    collection_action,
    collection_add,
    collection_share,
    collection_writers_set,
    collections_page,
    embed_all,
    job_progress,
)
from pmd_site.web.views.documents import (
    docid_redirect,
    document_file,
    document_original,
    document_page,
    document_raw,
    document_related,
)
from pmd_site.web.views.help import help_page
from pmd_site.web.views.history import history_page
from pmd_site.web.views.saved import saved_add, saved_digest, saved_page, saved_remove, saved_run
from pmd_site.web.views.search import result_feedback, search_page, search_suggestions
from pmd_site.web.views.status import index_config_change, searches_page, status_page
from pmd_site.web.views.tokens import token_add, token_remove, tokens_page

__all__ = [
    "ask_forget",
    "ask_stream",
    "collection_action",
    "collection_add",
    "collection_share",
    "collection_writers_set",
    "collections_page",
    "docid_redirect",
    "document_page",
    "document_file",
    "document_original",
    "document_raw",
    "document_related",
    "embed_all",
    "help_page",
    "history_page",
    "index_config_change",
    "job_progress",
    "result_feedback",
    "saved_add",
    "saved_digest",
    "saved_page",
    "saved_remove",
    "saved_run",
    "search_page",
    "search_suggestions",
    "searches_page",
    "status_page",
    "token_add",
    "token_remove",
    "tokens_page",
]
