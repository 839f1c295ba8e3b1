"""The web UI's one mapping of a service error (indexing.errors.PmdError) to what a page shows.

`problem_for` turns an error into a `WebProblem` (a kind the templates style, a title, the
detail and the HTTP status), by the error's `code` first and its `http_status` otherwise.
Everything in the web UI goes through it:

* `WebErrorMiddleware` answers a PmdError that a view of the web UI lets through: the problem
  as a fragment for htmx, as a page otherwise, with the error's status; before a view runs it
  refuses text the database cannot store (a NUL byte) in the URL, its query and the form, and
  a DataError of the database that no check caught is a 400 `input_refused`, not a 500;
* `form_problems(form)` shows a PmdError of the service a form view calls on that form, so
  the form is shown again with the user's input (form views answer 400 then);
* the search page shows a failed search as one of its problem states (`SEARCH_TITLES`).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from django import forms
from django.db import DataError

from indexing.errors import InputRefused, PmdError
from indexing.userinput import refuse_unstorable
from pmd_site.web.pages import page, wants_fragment


@dataclass(frozen=True)
class WebProblem:
    kind: str  # backend | no-embeddings | not-found | invalid | error (a CSS class, and the search page's states)
    title: str
    detail: str
    status: int


# Errors whose code says more than their status: (kind, title).
PROBLEMS_BY_CODE = {
    "llm_backend_unavailable": ("backend", "The language model server is not reachable"),
    "llm_backend_timeout": ("backend", "The language model server is not reachable"),
    "llm_model_missing": ("backend", "The embedding model is not available"),
    "not_embedded": ("no-embeddings", "No embeddings yet"),
    "answer_model_unset": ("setup", "Ask needs a chat model"),
    "ask_throttled": ("invalid", "Too many questions"),
    "sign_in_refused": ("invalid", "Sign-in refused"),
    "sign_in_failed": ("invalid", "Sign-in failed"),
}
# Titles of the other kinds: on a page of its own, and as a state of the search page.
PAGE_TITLES = {"not-found": "Not found", "invalid": "This cannot be done", "error": "Something went wrong"}
SEARCH_TITLES = {"invalid": "This search cannot run", "error": "Search failed"}
# Which form field an error concerns, by code (absent: the form as a whole).
FORM_FIELDS: dict[str, str] = {}


def problem_for(exc: BaseException, *, search: bool = False) -> WebProblem:
    """The web UI's one mapping of a failure to the state a page shows.

    `search=True`: a state of the search page, where every error the user can correct is
    "invalid" (a search in a collection that does not exist too).
    """
    titles = SEARCH_TITLES if search else PAGE_TITLES
    if isinstance(exc, DataError):  # the database refused input no check caught
        exc = InputRefused.from_database(exc)
    name = exc.__class__.__name__
    text = str(exc) or name
    if isinstance(exc, PmdError):
        if exc.code in PROBLEMS_BY_CODE:
            return WebProblem(*PROBLEMS_BY_CODE[exc.code], text, exc.http_status)
        if exc.http_status < 500:
            kind = "not-found" if exc.http_status == 404 and not search else "invalid"
            return WebProblem(kind, titles[kind], text, exc.http_status)
        return WebProblem("error", titles["error"], f"{name}: {text}", exc.http_status)
    if isinstance(exc, ValueError):
        return WebProblem("invalid", titles["invalid"], text, 400)
    return WebProblem("error", titles["error"], f"{name}: {text}", 500)


def problem_response(request, exc: PmdError | DataError):
    """A PmdError as the answer of a web UI view: a fragment for htmx, else a page; its status."""
    problem = problem_for(exc)
    template = "web/_problem.html" if wants_fragment(request) else "web/problem.html"
    return page(request, template, {"problem": problem}, status=problem.status)


class WebErrorMiddleware:
    """Answers a PmdError raised by a view of the web UI (the `search` URL namespace) with its problem.

    The JSON API and MCP map errors themselves; the admin and the login pages are left alone."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        """Text the database cannot store, anywhere in a web UI request, is its problem page (422)."""
        match = getattr(request, "resolver_match", None)
        if match is None or match.namespace != "search":
            return None
        try:
            refuse_unstorable(
                {
                    **view_kwargs,
                    **dict(request.GET.lists()),
                    **(dict(request.POST.lists()) if request.method == "POST" else {}),
                }
            )
        except PmdError as exc:
            return problem_response(request, exc)
        return None

    def process_exception(self, request, exception):
        match = getattr(request, "resolver_match", None)
        if isinstance(exception, (PmdError, DataError)) and match is not None and match.namespace == "search":
            return problem_response(request, exception)
        return None


@contextmanager
def form_problems(form: forms.Form):
    """Show a PmdError raised inside on `form` (on the field its code concerns); the view then
    renders the form again (`form.errors` is set)."""
    try:
        yield
    except PmdError as exc:
        form.add_error(FORM_FIELDS.get(exc.code), problem_for(exc).detail)
