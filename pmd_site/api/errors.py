"""Every error the API answers with: `{"message": ..., "suggestions": [...], "code": ...}`.

Mapped here once, for the whole API: a service's PmdError (indexing.errors) brings its own
status, code and headers (TokenThrottled: Retry-After) and the API's hint from API_HINTS;
ninja's HttpError (the API's own 401 and 403, a failed CSRF check) and its validation errors
(422) get a stable code from their status.
Input is checked once here too: text the database cannot store (a NUL byte) in any validated
parameter is a 422 `invalid_text` before an endpoint runs, and a DataError the database still
raises is a 400 `input_refused`, never a 500. What no endpoint answers is in the same shape: a
path that names nothing (404, `pmd_site.api._PmdNinjaAPI`), a method the path does not have
(405), a body over DATA_UPLOAD_MAX_MEMORY_SIZE (413, not Django's HTML 400 and its logged
traceback).
"""

import functools

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DataError
from django.http import Http404
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError, ValidationError

from indexing.errors import InputRefused, PmdError
from indexing.userinput import refuse_unstorable

# The code of an error that is not a service's, by its HTTP status.
HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
    422: "invalid_input",
    429: "throttled",
}

# What the API adds to a service error's message, in its own terms (endpoints), by code
# (indexing.errors.PmdError.hint_from): the services' messages name no face's syntax.
API_HINTS = {
    "not_embedded": "staff start embedding with POST /api/collections/<name>/embed",
}

AUTHENTICATION_REQUIRED = "authentication required: send `Authorization: Bearer <token>` (pmd token create --user NAME)"


def refuse_unstorable_input(view):
    """Every endpoint's parsed parameters (path, query, JSON body) pass `refuse_unstorable` first."""

    @functools.wraps(view)
    def checked(request, **values):
        named: dict = {}
        for name, value in values.items():  # a schema's fields by the names the client wrote (`q`, `tag`)
            named.update(value.dict(by_alias=True) if isinstance(value, Schema) else {name: value})
        refuse_unstorable(named)
        return view(request, **values)

    return checked


def install_error_handlers(api: NinjaAPI) -> None:
    """Register the API's input check and exception handlers on `api`."""

    def error(request, status: int, message: str, code: str, suggestions: list[str] | None = None, **extra):
        response = api.create_response(
            request, {"message": message, "suggestions": suggestions or [], "code": code, **extra}, status=status
        )
        if status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="pmd"'
        return response

    def on_pmd_error(request, exc: PmdError):
        """Every service error, by the status, code and headers it carries (see indexing.errors)."""
        hint = exc.hint_from(API_HINTS)
        message = f"{exc.detail}: {hint}" if hint else exc.detail
        response = error(request, exc.http_status, message, exc.code, exc.suggestions, **exc.fields)
        for header, value in exc.headers.items():  # Retry-After of a blocked address (TokenThrottled)
            response[header] = value
        return response

    def on_http_error(request, exc: HttpError):
        message = str(exc)
        if isinstance(exc, AuthenticationError) and exc.message == "Unauthorized":  # ninja's default text
            message = AUTHENTICATION_REQUIRED
        return error(request, exc.status_code, message, HTTP_CODES.get(exc.status_code, "error"))

    def on_validation(request, exc: ValidationError):
        problems = []
        for err in exc.errors:
            where = ".".join(str(p) for p in err.get("loc", ()) if p not in {"body", "query", "path", "payload"})
            problems.append(f"{where or 'request'}: {err.get('msg', 'invalid')}")
        return error(request, 422, "invalid request: " + "; ".join(problems), HTTP_CODES[422], errors=exc.errors)

    def on_data_error(request, exc: DataError):
        """The last resort for input no check caught: the database's own refusal, as the client's error."""
        return on_pmd_error(request, InputRefused.from_database(exc))

    def on_not_found(request, exc: Http404):
        return error(request, 404, f"nothing at {request.path}", HTTP_CODES[404])

    def on_too_large(request, exc: RequestDataTooBig):
        """The client sent too much: its error, answered without reading the body (nor logging it)."""
        return error(
            request,
            413,
            f"the request body is over the {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes the server accepts",
            HTTP_CODES[413],
        )

    api.add_decorator(refuse_unstorable_input)  # after validation: the values the endpoint gets
    api.add_exception_handler(PmdError, on_pmd_error)
    api.add_exception_handler(DataError, on_data_error)
    api.add_exception_handler(HttpError, on_http_error)
    api.add_exception_handler(ValidationError, on_validation)
    api.add_exception_handler(Http404, on_not_found)
    api.add_exception_handler(RequestDataTooBig, on_too_large)
