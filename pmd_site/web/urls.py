"""Routes of the browser UI (and Django's login/logout views)."""

from django.urls import path

from pmd_site.web import views

app_name = "search"

urlpatterns = [
    path("", views.search_page, name="search"),
    path("feedback/", views.result_feedback, name="feedback"),
    path("suggest/", views.search_suggestions, name="suggest"),
    path("ask/stream", views.ask_stream, name="ask_stream"),
    path("ask/<uuid:conversation>/delete/", views.ask_forget, name="ask_forget"),
    path("doc/<str:collection>/<path:path>", views.document_page, name="document"),
    path("raw/<str:collection>/<path:path>", views.document_raw, name="raw"),
    path("file/<str:collection>/<path:path>", views.document_file, name="file"),
    path("original/<str:collection>/<path:path>", views.document_original, name="original"),
    path("d/<str:docid>", views.docid_redirect, name="docid"),
    path("collections/", views.collections_page, name="collections"),
    path("collections/add/", views.collection_add, name="collection_add"),
    path("collections/embed/", views.embed_all, name="embed_all"),
    path("collections/<str:name>/share/", views.collection_share, name="collection_share"),
    path("collections/<str:name>/writers/", views.collection_writers_set, name="collection_writers"),
    path("collections/<str:name>/<str:action>/", views.collection_action, name="collection_action"),
    path("jobs/<uuid:job_id>/", views.job_progress, name="job"),
    path("status/", views.status_page, name="status"),
    path("status/searches/", views.searches_page, name="searches"),
    path("saved/", views.saved_page, name="saved"),
    path("saved/add/", views.saved_add, name="saved_add"),
    # `path`, and run last: a name saved before names were checked may hold a '/'.
    path("saved/<path:name>/remove/", views.saved_remove, name="saved_remove"),
    path("saved/<path:name>/digest/", views.saved_digest, name="saved_digest"),
    path("saved/<path:name>/", views.saved_run, name="saved_run"),
    path("status/config/", views.index_config_change, name="index_config"),
    path("tokens/", views.tokens_page, name="tokens"),
    path("tokens/new/", views.token_add, name="token_add"),
    path("tokens/<int:token_id>/revoke/", views.token_remove, name="token_revoke"),
    path("history/", views.history_page, name="history"),
    path("help/", views.help_page, name="help"),
    path("help/<path:path>", views.help_page, name="help_file"),
    path("related/<str:collection>/<path:path>", views.document_related, name="related"),
]
