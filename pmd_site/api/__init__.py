"""The JSON API under /api/ (django-ninja): a thin adapter over the search and indexing services.

Every endpoint parses input into the same objects the CLI builds (SearchRequest, references,
collection names), calls one service or selector, and serialises its result. Authentication is
a per-user bearer token (`pmd token create`) or the Django session of the web UI (with CSRF for
unsafe methods). Errors are `{"message": ..., "suggestions": [...], "code": ...}`; a service's
error (indexing.errors.PmdError) brings its own status and code.

    __init__.py     `api`, the NinjaAPI that pmd_site.urls mounts: auth, error handlers, routers
    auth.py         bearer token (throttled per address) or session → request.auth, an Access
    errors.py       the one mapping of errors to status, code, message and suggestions
    schemas.py      schemas several resources share (ErrorOut, JobOut)
    search.py  documents.py  links.py  related.py  collections.py  jobs.py  contexts.py  status.py
    notes.py
                    one router per resource, each with its own schemas
"""

import functools
import inspect

from django.http import Http404
from django.urls import URLPattern, re_path
from ninja import NinjaAPI
from ninja.errors import HttpError

from pmd_site.api import ask, collections, contexts, documents, history, jobs, links, notes, related, search, status
from pmd_site.api.auth import SessionAuth, TokenAuth
from pmd_site.api.errors import install_error_handlers

__all__ = ["api"]


class _PmdNinjaAPI(NinjaAPI):
    def get_openapi_operation_id(self, operation) -> str:
        # The ids published while the API was one module (endpoints.py): clients generated
        # from /api/openapi.json keep their method names whatever module a route lives in.
        return f"search_api_endpoints_{operation.view_func.__name__}"

    def _get_urls(self):
        """ninja's routes, each answering a method it does not have in the API's error shape (not
        ninja's plain-text 405), then every other path under /api/: a JSON 404, not the web UI's page."""
        urls = [_methods_checked(self, url) if isinstance(url, URLPattern) else url for url in super()._get_urls()]
        return [*urls, re_path(r"", functools.partial(_path_unknown, api=self))]


def _methods_checked(api: NinjaAPI, url: URLPattern) -> URLPattern:
    view = url.callback
    if inspect.iscoroutinefunction(view):  # no async route yet: its 405 would stay ninja's own
        return url

    @functools.wraps(view)  # keeps ninja's csrf_exempt: the API checks CSRF itself (SessionAuth)
    def checked(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        if response.status_code != 405 or response.get("Content-Type", "").startswith("application/json"):
            return response
        answer = api.on_exception(
            request, HttpError(405, f"{request.method} is not allowed here: use {response['Allow']}")
        )
        answer["Allow"] = response["Allow"]
        return answer

    url.callback = checked
    return url


def _path_unknown(request, api: NinjaAPI):
    return api.on_exception(request, Http404())


api = _PmdNinjaAPI(
    title="pmd API",
    version="1",
    description=(
        "Search and read a pmd markdown index. Authenticate with `Authorization: Bearer <token>` "
        "(create one with `pmd token create --user NAME`) or a logged-in web session."
    ),
    auth=[TokenAuth(), SessionAuth()],
    urls_namespace="pmd-api",
    docs_url="/docs",
)
install_error_handlers(api)

api.add_router("", search.router)
api.add_router("", documents.router)
api.add_router("", links.router)
api.add_router("", related.router)
api.add_router("", history.router)
api.add_router("", ask.router)
api.add_router("/collections", collections.router)
api.add_router("/jobs", jobs.router)
api.add_router("/contexts", contexts.router)
api.add_router("/status", status.router)
api.add_router("/notes", notes.router)
