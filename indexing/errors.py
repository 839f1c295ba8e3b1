"""The errors pmd's services raise for a caller to act on: one small hierarchy for every face.

Each error carries its meaning as data: a `message` (one line, free of any face's syntax: no
CLI flags, no URLs of this server), `suggestions` (things the caller may have meant), a stable
`code` for programs and the `http_status` the JSON API answers with. Each face maps the whole
family once (the API's exception handler, the CLI's `main`, the web UI's error page, the MCP
server's tool error) and may add hints in its own syntax, keyed by `code`.

This module imports nothing of pmd's own, so the models, services, retrieval and the LLM
clients can all raise these errors without an import cycle.
"""

from __future__ import annotations


class PmdError(Exception):
    """Base of every error a user or a client can act on."""

    code: str = "error"
    http_status: int = 400
    # A short phrase a remote face (API, MCP) puts before the message, e.g. for backend failures.
    summary: str = ""

    def __init__(self, message: str = "", suggestions: list[str] | None = None):
        super().__init__(message)
        self.message = message
        self.suggestions = list(suggestions or [])

    def __str__(self) -> str:
        text = self.message
        if self.suggestions:
            text += "\n  did you mean:\n" + "\n".join(f"    {s}" for s in self.suggestions)
        return text

    @property
    def detail(self) -> str:
        """The message with the summary in front, for callers that did not ask the backend themselves."""
        return f"{self.summary}: {self.message}" if self.summary else self.message


# --- input the caller can correct -----------------------------------------------------------


class InvalidRequest(PmdError, ValueError):
    code = "invalid_request"
    http_status = 400


class InvalidCollection(InvalidRequest):
    """A collection request that cannot be carried out (bad name, missing folder, ...)."""

    code = "invalid_collection"


class CollectionPathRefused(InvalidCollection):
    """A folder that may not become a collection for this caller."""

    code = "collection_path_refused"


class InvalidContext(InvalidRequest):
    code = "invalid_context"


class InvalidSearchInput(InvalidRequest):
    """Search input the user can fix (an empty query, a structured query without text, ...)."""

    code = "invalid_search"
    http_status = 422


class EmptyQuery(InvalidSearchInput):
    """A search with neither words nor a filter: refused once, in `search_run`, for every face."""

    code = "empty_query"

    def __init__(self, message: str = "empty query: a search needs words or a filter", suggestions=None):
        super().__init__(message, suggestions)


class NotEmbedded(InvalidSearchInput):
    """Vector search before anything is embedded with the configured model."""

    code = "not_embedded"


class MultiGetRefused(InvalidRequest):
    """A multi-get that its byte limits refuse."""

    code = "multi_get_refused"
    http_status = 422


class InvalidText(InvalidRequest):
    """Input the database cannot store as text (a NUL byte, half a surrogate pair): refused by each
    face before it reaches SQL (indexing.userinput)."""

    code = "invalid_text"
    http_status = 422


class InvalidGlob(InvalidRequest):
    """A path glob pmd cannot turn into a regex (a range that runs backwards, an unknown class, too long)."""

    code = "invalid_glob"
    http_status = 422


class InputRefused(InvalidRequest):
    """Input the database itself refused (its DataError): the last resort of every face, for what no
    check before it caught. The message is the database's first line."""

    code = "input_refused"
    http_status = 400

    @classmethod
    def from_database(cls, exc: Exception) -> InputRefused:
        first = (str(exc).strip().splitlines() or [""])[0]
        return cls(f"the database refused this input: {first}" if first else "the database refused this input")


class InvalidAccount(InvalidRequest):
    """An account request that cannot be carried out (a name or password the rules refuse)."""

    code = "invalid_account"


class InvalidToken(InvalidRequest):
    code = "invalid_token"


class BenchmarkError(InvalidRequest):
    code = "benchmark_error"


# --- things that are not there --------------------------------------------------------------


class NotFound(PmdError, LookupError):
    code = "not_found"
    http_status = 404


class CollectionNotFound(NotFound):
    """No collection of that name; `suggestions` are the close names as pmd:// URIs."""

    code = "collection_not_found"

    def __init__(self, message: str = "", suggestions: list[str] | None = None, *, name: str | None = None):
        if name is not None and not message:
            message = f"no collection named '{name}'"
        super().__init__(message, suggestions)
        self.name = name


class DocumentNotFound(NotFound):
    code = "document_not_found"


class ContextNotFound(NotFound):
    code = "context_not_found"


class JobNotFound(NotFound):
    code = "job_not_found"


# --- conflicts ------------------------------------------------------------------------------


class Conflict(PmdError):
    code = "conflict"
    http_status = 409


class CollectionExists(Conflict):
    code = "collection_exists"

    def __init__(self, message: str = "", suggestions: list[str] | None = None, *, name: str | None = None):
        if name is not None and not message:
            message = f"a collection named '{name}' already exists"
        super().__init__(message, suggestions)
        self.name = name


class AccountExists(Conflict):
    code = "account_exists"

    def __init__(self, message: str = "", suggestions: list[str] | None = None, *, name: str | None = None):
        if name is not None and not message:
            message = f"an account named '{name}' already exists"
        super().__init__(message, suggestions)
        self.name = name


# --- services pmd depends on ----------------------------------------------------------------


class LLMBackendError(PmdError, RuntimeError):
    """Anything the LLM backend could not do; the message is meant for the user."""

    code = "llm_backend_error"
    http_status = 503
    summary = "the model backend is not available"


class LLMBackendUnavailable(LLMBackendError):
    code = "llm_backend_unavailable"


class LLMModelMissing(LLMBackendError):
    code = "llm_model_missing"


class LLMBackendTimeout(LLMBackendError):
    code = "llm_backend_timeout"


class LLMBadResponse(LLMBackendError):
    code = "llm_bad_response"


# --- pmd's own setup on this machine --------------------------------------------------------


class SetupError(PmdError, RuntimeError):
    """pmd cannot run as set up here (an environment variable, an embedded server's folder);
    the message says what to change. Raised before or beside any request, by the operator's doing."""

    code = "setup_error"
    http_status = 500
