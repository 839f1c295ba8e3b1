"""One error module (indexing/errors.py): each error class is declared once, keeps its code and
status on every face, and the services' messages name no face's syntax (each face adds its own
hints, keyed by code)."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re

import pytest
from django.test import RequestFactory

from indexing import errors
from tests.support.paths import ROOT  # the repository, wherever this file sits

PACKAGES = ("indexing", "search", "pmd_site")
# A face's syntax: a pmd command, a command-line flag, manage.py.
FACE_SYNTAX = re.compile(
    r"`pmd |\bpmd (?:embed|update|models|token|user|collection|up)\b|manage\.py|createsuperuser"
    r"|(?<![\w-])--[a-z]"
)
CLI_COMMAND = re.compile(r"\bpmd [a-z]")


def _modules():
    """Every module of pmd's three packages (migrations aside: they declare no errors)."""
    for package in PACKAGES:
        yield package
        for info in pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}."):
            if ".migrations" not in info.name and not info.name.endswith("__main__"):
                yield info.name


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


OPTIONAL_EXTRAS = {"django_auth_ldap", "ldap"}  # the `ldap` extra: its module cannot load without them


def test_every_error_class_is_declared_once_in_indexing_errors():
    for name in _modules():
        try:
            importlib.import_module(name)  # a module that declares an error class makes it a subclass here
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] not in OPTIONAL_EXTRAS:
                raise
    classes = [errors.PmdError, *_subclasses(errors.PmdError)]
    elsewhere = sorted(
        f"{c.__module__}.{c.__qualname__}"
        for c in classes
        if c.__module__ != "indexing.errors" and not c.__module__.startswith("tests")
    )
    assert not elsewhere, f"error classes declared outside indexing/errors.py: {elsewhere}"
    by_code: dict[str, list[type]] = {}
    for cls in classes:
        if cls.__module__ == "indexing.errors":
            by_code.setdefault(cls.code, []).append(cls)
    for code, owners in by_code.items():
        for a in owners:
            for b in owners:
                assert issubclass(a, b) or issubclass(b, a), f"code {code!r} declared by {a.__name__} and {b.__name__}"


def test_no_module_declares_an_error_class_by_source():
    """The same rule read from the source: no `class X(SomePmdError)` outside indexing/errors.py."""
    names = {c.__name__ for c in [errors.PmdError, *_subclasses(errors.PmdError)] if c.__module__ == "indexing.errors"}
    found = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path == ROOT / "indexing" / "errors.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    bases = {getattr(b, "attr", getattr(b, "id", "")) for b in node.bases}
                    if bases & names:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not found, found


def test_service_messages_name_no_face_syntax():
    """Every error the services (indexing/, search/) build carries a face-neutral message."""
    names = {c.__name__ for c in [errors.PmdError, *_subclasses(errors.PmdError)]}
    found = []
    for package in ("indexing", "search"):
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Call):
                    continue
                called = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if called not in names:
                    continue
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and FACE_SYNTAX.search(sub.value):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {sub.value[:80]!r}")
    assert not found, found


# --- the faces: one mapping each --------------------------------------------------------------


def _api_answer(exc):
    from pmd_site.api import api

    request = RequestFactory().get("/api/search")
    response = api.on_exception(request, exc)
    import json

    return response.status_code, json.loads(response.content), response


def _cli_text(exc):
    from pmd_site.cli import error_text

    return error_text(exc)


def _mcp_text(exc):
    from pmd_site.mcp.errors import error_text

    return error_text(exc)


def _web(exc):
    from pmd_site.web.errors import problem_for

    return problem_for(exc)


NOT_EMBEDDED = errors.NotEmbedded("nothing is embedded with embeddinggemma yet", model="embeddinggemma")


def test_not_embedded_names_a_cli_command_only_on_the_command_line(db):
    assert "run `pmd embed`" in _cli_text(NOT_EMBEDDED)
    status, body, _ = _api_answer(NOT_EMBEDDED)
    assert (status, body["code"]) == (422, "not_embedded")
    assert not CLI_COMMAND.search(body["message"]) and "/api/collections/<name>/embed" in body["message"]
    mcp = _mcp_text(NOT_EMBEDDED)
    assert not CLI_COMMAND.search(mcp) and "pmd_search" in mcp
    assert not CLI_COMMAND.search(_web(NOT_EMBEDDED).detail)


def test_hints_name_the_faces_own_syntax_and_fill_in_the_errors_data(db):
    assert _cli_text(errors.UserNotFound(name="ada")) == "no user named 'ada': create one with `pmd user create ada`"
    assert _cli_text(errors.TokenNotFound("no token matches 'x'")) == "no token matches 'x': see `pmd token list`"
    assert _cli_text(errors.LLMModelMissing("m")).endswith("pull it with `pmd models pull`")
    assert "pmd models pull" not in _cli_text(errors.LLMModelMissing("m", backend="openai"))  # pmd cannot pull there
    for face in (_mcp_text, lambda exc: _api_answer(exc)[1]["message"]):
        for exc in (errors.UserNotFound(name="ada"), errors.LLMModelMissing("m"), errors.TokenNotFound("no token")):
            assert not CLI_COMMAND.search(face(exc)), face(exc)


# (error, code, HTTP status): the codes and statuses API clients depend on, the same on every face.
KEPT = [
    (errors.CollectionNotFound(name="x"), "collection_not_found", 404),
    (errors.CollectionExists(name="x"), "collection_exists", 409),
    (errors.CollectionPathRefused("no"), "collection_path_refused", 400),
    (errors.InvalidCollection("no"), "invalid_collection", 400),
    (errors.DocumentNotFound("no document x"), "document_not_found", 404),
    (errors.ContextNotFound("no context"), "context_not_found", 404),
    (errors.InvalidContext("empty"), "invalid_context", 400),
    (errors.JobNotFound("no job"), "job_not_found", 404),
    (errors.InvalidSearchInput("empty query"), "invalid_search", 422),
    (NOT_EMBEDDED, "not_embedded", 422),
    (errors.MultiGetRefused("too many"), "multi_get_refused", 422),
    (errors.InvalidText("NUL"), "invalid_text", 422),
    (errors.InvalidGlob("bad glob"), "invalid_glob", 422),
    (errors.InvalidPath("../x"), "invalid_path", 400),
    (errors.UnknownFormat("no format"), "unknown_format", 400),
    (errors.InputRefused("refused"), "input_refused", 400),
    (errors.InvalidToken("bad expiry"), "invalid_token", 400),
    (errors.InvalidSharing("bad visibility"), "invalid_sharing", 400),
    (errors.UserNotFound(name="x"), "user_not_found", 404),
    (errors.GroupNotFound("no group"), "group_not_found", 404),
    (errors.AccessDenied("staff only"), "forbidden", 403),
    (errors.TokenThrottled(7), "throttled", 429),
    (errors.CollectionPathMissing("gone"), "collection_path_missing", 404),
    (errors.Conflict("taken"), "conflict", 409),
    (errors.LLMBackendUnavailable("http://127.0.0.1:9"), "llm_backend_unavailable", 503),
    (errors.LLMModelMissing("m"), "llm_model_missing", 503),
    (errors.LLMBackendTimeout("http://127.0.0.1:9", 2), "llm_backend_timeout", 503),
    (errors.LLMBadResponse("bad"), "llm_bad_response", 503),
    (errors.LLMEndpointMissing("no route"), "llm_bad_response", 503),
    (errors.EmbeddingError("broken"), "embedding_failed", 503),
    (errors.BenchmarkError("bad run"), "benchmark_error", 400),
    (errors.ServerSetupError("unsafe"), "server_setup_error", 500),
    (errors.ConfigError("bad value"), "config_error", 500),
    (errors.BackupFailed("no pg_dump"), "backup_failed", 500),
    (errors.RestoreRefused("in use"), "restore_refused", 409),
]


@pytest.mark.parametrize(("exc", "code", "status"), KEPT, ids=[code for _, code, _ in KEPT])
def test_errors_keep_their_codes_and_statuses_on_every_face(db, exc, code, status):
    from mcp.server.mcpserver.exceptions import ToolError

    from pmd_site.mcp.errors import tool_call

    assert (exc.code, exc.http_status) == (code, status)
    answered, body, response = _api_answer(exc)
    assert (answered, body["code"]) == (status, code)
    assert body["message"].startswith(exc.detail)
    for header, value in exc.headers.items():
        assert response[header] == value
    assert _cli_text(exc).startswith(exc.message)

    def raises():
        raise exc

    with pytest.raises(ToolError, match=re.escape(exc.detail[:40])):
        tool_call(raises)()
    assert _web(exc).status == status


def test_a_throttled_client_gets_retry_after_from_the_errors_headers(db):
    _, _, response = _api_answer(errors.TokenThrottled(7))
    assert response["Retry-After"] == "7"
