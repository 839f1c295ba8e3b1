"""Every error pmd raises for a caller to act on: one module, one class per meaning.

Each error carries its meaning as data: a `message` (one line, free of any face's syntax: no
CLI commands or flags, no URLs of this server, no manage.py), `suggestions` (things the caller
may have meant), the fields a face needs to say more (`name`, `model`, `url`, `retry_after` …),
a stable `code` for programs, the `http_status` and `headers` the JSON API answers with. Each
face maps the whole family once (pmd_site/api/errors.py, pmd_site/cli/__init__.py,
pmd_site/web/errors.py, pmd_site/mcp/errors.py) and adds hints in its own syntax from its own
table keyed by `code` (`hint_from`).

Every class is declared here and nowhere else (tests/test_error_module.py checks it): a module
raises these classes, it does not subclass them for a local name. This module imports nothing of
pmd's own, so every layer can raise these errors without an import cycle.
"""

from __future__ import annotations

import string


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

    @property
    def headers(self) -> dict[str, str]:
        """HTTP headers an answer carrying this error adds (Retry-After of a throttled client)."""
        return {}

    @property
    def fields(self) -> dict:
        """Data a program needs to act on the error, beside the message (a stale note's current hash)."""
        return {}

    def hint_from(self, hints: dict) -> str | None:
        """A face's hint for this error from its table keyed by code: a text whose `{fields}` are
        filled in from the error's data (a field the error does not have stays as its name in
        capitals), or a function of the error for a hint that depends on its data."""
        template = hints.get(self.code)
        if callable(template):
            template = template(self)
        if not template:
            return None
        fields = {
            name: getattr(self, name, None) or name.upper()
            for _, name, _, _ in string.Formatter().parse(template)
            if name
        }
        return template.format(**fields)


# --- input the caller can correct -----------------------------------------------------------


class InvalidRequest(PmdError, ValueError):
    code = "invalid_request"
    http_status = 400


class CommandError(PmdError):
    """A face's own input it refuses before any service runs (the command line's arguments)."""

    code = "command_error"


class InvalidCollection(InvalidRequest):
    """A collection request that cannot be carried out (bad name, missing folder, ...)."""

    code = "invalid_collection"


class CollectionPathRefused(InvalidCollection):
    """A folder that may not become a collection for this caller (see `collection_root_check`)."""

    code = "collection_path_refused"


class InvalidContext(InvalidRequest):
    """A context request that cannot be carried out; the message says why."""

    code = "invalid_context"


class LinePastEnd(InvalidRequest):
    """A line asked for (`note.md:99`, a first line) after the document's last: an error, not an empty answer."""

    code = "line_past_end"
    http_status = 416

    def __init__(self, *, uri: str, line: int, lines: int):
        self.uri, self.line, self.lines = uri, line, lines
        super().__init__(f"{uri} has {lines} line{'' if lines == 1 else 's'}: line {line} is past its end")


class InvalidSearchInput(InvalidRequest):
    """Search input the user can fix (an empty query, a filter or a structured query pmd cannot read, ...)."""

    code = "invalid_search"
    http_status = 422


class EmptyQuery(InvalidSearchInput):
    """A search with neither words nor a filter: refused once, in `search_run`, for every face."""

    code = "empty_query"

    def __init__(self, message: str = "empty query: a search needs words or a filter", suggestions=None):
        super().__init__(message, suggestions)


class NotEmbedded(InvalidSearchInput):
    """Vector search before anything (or any commit) is embedded with the configured `model`."""

    code = "not_embedded"

    def __init__(
        self,
        message: str = "",
        suggestions: list[str] | None = None,
        *,
        model: str | None = None,
        held: list[str] | None = None,
        underway: bool = False,
    ):
        super().__init__(message, suggestions)
        self.model = model
        self.held = held or []  # other models' vectors in the index: no advice to re-embed blindly
        self.underway = underway  # a worker is embedding (or will): no advice to run `pmd embed`


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


class InvalidPath(InvalidRequest):
    """A path that could escape its collection or is not a path at all (a ValueError too)."""

    code = "invalid_path"


class NotePathRefused(InvalidPath):
    """A note's path pmd will not write: outside the collection or its mask, into a dot or ignored
    folder, through a symbolic link."""

    code = "note_path_refused"
    http_status = 422


class NoteTooLarge(InvalidRequest):
    """A note over the size a write may have (PMD_NOTE_MAX_BYTES)."""

    code = "note_too_large"
    http_status = 413


class NoteEditRefused(InvalidRequest):
    """An edit that cannot be applied as asked (no such heading, a text found another number of times)."""

    code = "note_edit_refused"
    http_status = 422


class UnknownFormat(InvalidRequest):
    """No output format of that name (a ValueError too)."""

    code = "unknown_format"


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
    """A token request that cannot be carried out; the message says why."""

    code = "invalid_token"


class InvalidSharing(InvalidRequest):
    """A sharing request (visibility, groups, members) that cannot be carried out."""

    code = "invalid_sharing"


class BenchmarkError(InvalidRequest):
    code = "benchmark_error"


# --- who may do what ------------------------------------------------------------------------


class AccessDenied(PmdError, PermissionError):
    """The caller may see this but not change it (a read-only token, a member who is not staff)."""

    code = "forbidden"
    http_status = 403


class SignInRefused(AccessDenied):
    """A sign-in through an identity provider or a proxy that pmd will not accept: the account is
    deactivated, does not exist where only existing accounts may sign in, or its name is taken."""

    code = "sign_in_refused"


class SignInFailed(PmdError):
    """A sign-in through an identity provider that could not be completed or verified (discovery
    failed, a state seen before, an ID token with a wrong issuer, audience, signature or age)."""

    code = "sign_in_failed"
    http_status = 400


class TokenThrottled(PmdError):
    """Too many failed tokens from this address; `retry_after` is in whole seconds (sent as Retry-After)."""

    code = "throttled"
    http_status = 429

    def __init__(self, retry_after: int):
        self.retry_after = max(1, retry_after)
        super().__init__(f"too many failed API token attempts from your address: retry in {self.retry_after} s")

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class AskThrottled(PmdError):
    """This user asked more questions than PMD_ANSWER_RATE per minute; `retry_after` in whole seconds."""

    code = "ask_throttled"
    http_status = 429

    def __init__(self, retry_after: int):
        self.retry_after = max(1, retry_after)
        super().__init__(f"too many questions in the last minute: ask again in {self.retry_after} s")

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


# --- things that are not there --------------------------------------------------------------


class NotFound(PmdError, LookupError):
    code = "not_found"
    http_status = 404


class CollectionNotFound(NotFound):
    """No collection of that name (asked for, searched in, or named by a reference); `suggestions`
    are the close names as pmd:// URIs."""

    code = "collection_not_found"

    def __init__(self, message: str = "", suggestions: list[str] | None = None, *, name: str | None = None):
        if name is not None and not message:
            message = f"no collection named '{name}'"
        super().__init__(message, suggestions)
        self.name = name


class CollectionPathMissing(NotFound, FileNotFoundError):
    """The collection's folder is gone; refreshing reports it per collection (a FileNotFoundError too)."""

    code = "collection_path_missing"


class DocumentNotFound(NotFound):
    """No document for a reference; `suggestions` are close pmd:// URIs (shown under "did you mean")."""

    code = "document_not_found"


class NoteNotFound(NotFound):
    """No note at that path of a collection (on disk, or in its trash)."""

    code = "note_not_found"


class ContextNotFound(NotFound):
    code = "context_not_found"


class ConversationNotFound(NotFound):
    code = "conversation_not_found"


class JobNotFound(NotFound):
    code = "job_not_found"


class UserNotFound(NotFound):
    code = "user_not_found"

    def __init__(self, message: str = "", suggestions: list[str] | None = None, *, name: str | None = None):
        if name is not None and not message:
            message = f"no user named '{name}'"
        super().__init__(message, suggestions)
        self.name = name


class GroupNotFound(NotFound):
    code = "group_not_found"


class SavedSearchNotFound(NotFound):
    """No saved search of that name among those the caller sees (their own and their groups')."""

    code = "saved_search_not_found"

    def __init__(self, message: str = "", suggestions: list[str] | None = None, *, name: str | None = None):
        if name is not None and not message:
            message = f"no saved search named '{name}'"
        super().__init__(message, suggestions)
        self.name = name


class TokenNotFound(NotFound):
    """No token (of those the caller may see) matches what was typed."""

    code = "token_not_found"


# --- conflicts ------------------------------------------------------------------------------


class Conflict(PmdError):
    code = "conflict"
    http_status = 409


class CollectionExists(Conflict):
    """The name is taken; each face adds how to choose another."""

    code = "collection_exists"

    def __init__(self, message: str = "", suggestions: list[str] | None = None, *, name: str | None = None):
        if name is not None and not message:
            message = f"a collection named '{name}' already exists"
        super().__init__(message, suggestions)
        self.name = name


class NoteExists(Conflict):
    """A write to a path that already holds a note, without asking to replace it."""

    code = "note_exists"


class NoteChanged(Conflict):
    """An edit based on a version of the note that is no longer the current one: read it again."""

    code = "note_changed"

    def __init__(self, message: str = "", suggestions: list[str] | None = None, *, current_hash: str = ""):
        super().__init__(message, suggestions)
        self.current_hash = current_hash

    @property
    def fields(self) -> dict:
        return {"current_hash": self.current_hash}


class FolderTaken(Conflict):
    """The folder is a collection already: a second one over it would show every hit twice."""

    code = "collection_folder_taken"

    def __init__(self, *, folder: str, name: str):
        super().__init__(f"folder {folder} is already collection '{name}'")
        self.name = name


class AccountExists(Conflict):
    code = "account_exists"

    def __init__(self, message: str = "", suggestions: list[str] | None = None, *, name: str | None = None):
        if name is not None and not message:
            message = f"an account named '{name}' already exists"
        super().__init__(message, suggestions)
        self.name = name


class RestoreRefused(Conflict):
    """A restore would replace a database that something is using (a running pmd, its workers)."""

    code = "restore_refused"


# --- services pmd depends on ----------------------------------------------------------------


class LLMBackendError(PmdError, RuntimeError):
    """Anything the LLM backend could not do; the message is meant for the user."""

    code = "llm_backend_error"
    http_status = 503
    summary = "the model backend is not available"


class LLMBackendUnavailable(LLMBackendError):
    """Nothing answers at `url` (after retries), or the backend cannot run here at all (`message`)."""

    code = "llm_backend_unavailable"

    def __init__(self, url: str = "", *, backend: str = "ollama", detail: str = "", message: str = ""):
        self.url = url
        if not message:
            if backend == "ollama":
                message = f"Ollama is not reachable at {url}: start it (`ollama serve` / the compose `ollama` service)"
            else:
                message = f"the OpenAI-compatible server is not reachable at {url}: start it or fix PMD_OPENAI_BASE_URL"
            if detail:
                message += f" [{detail}]"
        super().__init__(message)


class LLMModelMissing(LLMBackendError):
    """The server (or the local models folder) does not have `model`."""

    code = "llm_model_missing"

    def __init__(self, model: str, *, backend: str = "ollama", message: str = ""):
        self.model = model
        self.backend = backend  # "openai": pmd cannot pull for that server, it loads its own models
        if not message:
            if backend == "ollama":
                message = f"model {model} is not pulled (`ollama pull {model}`)"
            else:
                message = f"model {model} is not served by the OpenAI-compatible server: load it there first"
        super().__init__(message)


class LLMBackendTimeout(LLMBackendError):
    """The server at `url` accepted the request but did not answer within `seconds`."""

    code = "llm_backend_timeout"

    def __init__(self, url: str, seconds: float):
        self.url = url
        self.seconds = seconds
        super().__init__(
            f"the LLM server at {url} did not answer within {seconds:g}s "
            "(raise PMD_LLM_TIMEOUT, or use a smaller model / batch)"
        )


class LLMBadResponse(LLMBackendError):
    """The server answered with an error or with something pmd cannot use."""

    code = "llm_bad_response"


class LLMEndpointMissing(LLMBadResponse):
    """The server has no such route (404/405): a rerank API it does not speak (tried the next one)."""


class AnswerModelUnset(LLMBackendError):
    """No chat model is configured for answering questions (PMD_ANSWER_MODEL empty or `none`)."""

    code = "answer_model_unset"

    def __init__(self):
        super().__init__(
            "asking needs a chat model: set PMD_ANSWER_MODEL to one your model server has "
            "(e.g. qwen3:1.7b or llama3.2 on Ollama); search works without it"
        )


class EmbeddingError(LLMBackendError):
    """Embedding cannot go on; the message says what to do."""

    code = "embedding_failed"


class EmbeddingStopped(PmdError):
    """The process embedding is shutting down: the batch in flight is abandoned, what is stored stays."""

    code = "embedding_stopped"
    http_status = 503


# --- pmd's own setup on this machine --------------------------------------------------------


class SetupError(PmdError, RuntimeError):
    """pmd cannot run as set up here (an environment variable, an embedded server's folder);
    the message says what to change. Raised before or beside any request, by the operator's doing."""

    code = "setup_error"
    http_status = 500


class ServerSetupError(SetupError):
    """An embedded server (PostgreSQL, Redis) cannot be started safely; the message says what to change."""

    code = "server_setup_error"


class BackupFailed(SetupError):
    """A backup or restore could not be made: PostgreSQL's tools are missing or do not match the
    server, the file is not a pmd backup, or pg_dump / pg_restore failed (the message says which)."""

    code = "backup_failed"


class IndexMissing(SetupError):
    """A command that only reads an index (`pmd search`, `pmd mcp`) found none where it looked; it
    creates none: an empty index answering "no results" would hide that it looked in the wrong place."""

    code = "index_missing"

    def __init__(self, *, home: str, home_from: str, for_agents: bool = False):
        self.home = home
        where = ', e.g. "env": {"PMD_HOME": "…"} in the MCP client\'s configuration' if for_agents else ""
        super().__init__(
            f"no pmd index in {home} ({home_from}): set PMD_HOME to the folder `pmd up` uses (the "
            f'"pmd_home" that `pmd status --json` shows where pmd runs){where}, or DATABASE_URL for a '
            "PostgreSQL server; or create an index here with: pmd up FOLDER"
        )


class IndexOutdated(SetupError):
    """A command that only reads found an index whose database is behind this version of pmd; it
    leaves it as it is (the pmd that made it may still use it): migrating is an operator's step."""

    code = "index_outdated"

    def __init__(self, *, empty: bool = False):
        self.empty = empty
        super().__init__("this database holds no pmd index yet" if empty else "this index was made by an older pmd")


class ConfigError(SetupError, ValueError):
    """An environment variable holds a value pmd cannot use."""

    code = "config_error"


class InvalidSetting(InvalidRequest):
    """`pmd config set` (or the web) with a setting the index does not keep, or a value it cannot read."""

    code = "invalid_setting"
    http_status = 422


class ReplacesVectors(InvalidRequest):
    """A configuration change that means embedding everything again: it says what it replaces,
    and needs the caller's confirmation (`--yes`)."""

    code = "replaces_vectors"
    http_status = 409


class SavedSearchExists(Conflict):
    code = "saved_search_exists"

    def __init__(self, message: str = "", suggestions: list[str] | None = None, *, name: str | None = None):
        if name is not None and not message:
            message = f"you already have a saved search named '{name}'"
        super().__init__(message, suggestions)
        self.name = name
