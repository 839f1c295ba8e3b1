"""Bad input is a clear 4xx (or a tool error, or a CLI error), never a 500 or a traceback.

Text PostgreSQL cannot store (a NUL byte, half a surrogate pair) is refused by each face before
it reaches SQL (indexing.userinput); every glob becomes a regex both Python and PostgreSQL accept,
or InvalidGlob (indexing.paths); a DataError the database still raises is mapped on every face.
"""

from __future__ import annotations

import random
import re

import anyio
import pytest
from django.db import DataError, connection
from django.test import Client

from indexing.access import Access
from indexing.errors import InvalidGlob, InvalidText
from indexing.paths import MAX_GLOB_LENGTH, glob_match, glob_regex_body
from indexing.services.tokens import token_create
from search.filters import glob_to_regex
from tests.support.factories import make_user

NUL = "\x00"


# --- globs: one translator, valid in both engines --------------------------------------------


@pytest.mark.parametrize(
    "glob, message",
    [
        ("[z-a]", "runs backwards"),
        ("notes/[9-0]*.md", "runs backwards"),
        ("[[:alhpa:]]", "unknown character class"),
        ("x" * (MAX_GLOB_LENGTH + 1), "characters long"),
        ("*" * 100_000, "characters long"),
    ],
)
def test_invalid_globs_are_refused_with_a_typed_error(glob, message):
    with pytest.raises(InvalidGlob, match=message) as info:
        glob_regex_body(glob)
    assert info.value.code == "invalid_glob" and info.value.http_status == 422


@pytest.mark.parametrize(
    "glob, matches, misses",
    [
        ("[[:alpha:]]*.md", ["a.md", "Zed.md"], ["1.md", "a/b.md"]),
        ("[[:digit:]][[:digit:]].md", ["12.md"], ["1a.md"]),
        ("[!]", ["[!]"], ["!", "]"]),  # a class never closed is a literal, as in a shell
        ("[]", ["[]"], [""]),
        ("[]]", ["]"], ["x"]),
        ("[!a]", ["b"], ["a"]),
        ("[a-]", ["a", "-"], ["b"]),
        ("[\\]", ["\\"], ["x"]),
        ("a***b", ["ab", "a/x/b"], ["a"]),  # a run of stars is `**`
        ("{a,[z-z]}.md", ["a.md", "z.md"], ["b.md"]),
    ],
)
def test_glob_classes_mean_what_a_shell_means(glob, matches, misses):
    for path in matches:
        assert glob_match(glob, path), (glob, path)
    for path in misses:
        assert not glob_match(glob, path), (glob, path)


@pytest.mark.django_db
def test_every_glob_gives_a_regex_postgresql_accepts_and_reads_as_python_does():
    pieces = list("ab/-]![^:*?{},.z\\") + ["[:alpha:]", "[:digit:]", "[:", ":]", "é", " ", "(", ")", "|", "$", "+"]
    paths = [
        "a",
        "b/a",
        "a/b",
        "z",
        "ab",
        "[",
        "]",
        "!",
        "-",
        "^",
        ":",
        "a.md",
        "1",
        "é",
        " ",
        "[!]",
        "[]",
        "a-b",
        "{a,b}",
        "+",
        "$",
        "(",
        "|",
        "\\",
    ]
    rng = random.Random(25)
    disagree, accepted = [], 0
    with connection.cursor() as cursor:
        for _ in range(600):
            glob = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 9)))
            try:
                regex = glob_to_regex(glob)
            except InvalidGlob:
                continue
            cursor.execute("SELECT p, p ~ %s FROM unnest(%s::text[]) p", [regex, paths])  # DataError: a failure
            accepted += 1
            disagree += [(glob, p) for p, pg in cursor.fetchall() if (re.search(regex, p) is not None) != pg]
    assert accepted > 500 and disagree == []


# --- the API: 422 with a stable code for every parameter -------------------------------------


@pytest.fixture
def api(django_user_model):
    user = make_user("root", staff=True, is_superuser=True)
    raw = token_create(user=user, access=Access.local_user(), can_write=True).raw
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}", raise_request_exception=False)


API_CASES = [
    ("/api/search", {"q": f"a{NUL}b"}, "invalid_text"),
    ("/api/search", {"q": "x", "collection": f"no{NUL}tes"}, "invalid_text"),
    ("/api/search", {"q": "x", "tag": f"a{NUL}"}, "invalid_text"),
    ("/api/search", {"q": "x", "exclude_tag": f"a{NUL}"}, "invalid_text"),
    ("/api/search", {"q": "x", "path": f"a{NUL}"}, "invalid_text"),
    ("/api/search", {"q": "x", "where": f"k=v{NUL}"}, "invalid_text"),
    ("/api/search", {"q": "x", "where": f"k{NUL}=v"}, "invalid_text"),
    ("/api/search", {"q": "x", "after": f"2020{NUL}"}, "invalid_text"),
    ("/api/search", {"q": f"tag:a{NUL}b"}, "invalid_text"),
    ("/api/search", {"q": "x", "path": "[z-a]"}, "invalid_glob"),
    ("/api/search", {"q": "x", "path": "*" * 100_000}, "invalid_glob"),
    ("/api/search", {"q": "path:[z-a] x"}, "invalid_glob"),
    ("/api/search", {"q": "x", "mode": "query", "path": "[[:nope:]]"}, "invalid_glob"),
    ("/api/get", {"ref": f"pmd://no{NUL}tes/a.md"}, "invalid_text"),
    ("/api/get", {"ref": "a.md", "collection": f"x{NUL}"}, "invalid_text"),
    ("/api/multi-get", {"pattern": "notes/[z-a]"}, "invalid_glob"),
    ("/api/multi-get", {"pattern": f"no{NUL}tes/*"}, "invalid_text"),
    ("/api/multi-get", {"pattern": "a.md", "collection": f"x{NUL}"}, "invalid_text"),
    ("/api/links", {"ref": f"pmd://no{NUL}tes/a.md"}, "invalid_text"),
    ("/api/related", {"ref": f"pmd://no{NUL}tes/a.md"}, "invalid_text"),
    ("/api/history", {"q": f"a{NUL}"}, "invalid_text"),
    ("/api/history", {"path": f"a{NUL}"}, "invalid_text"),
    ("/api/history", {"path": "[z-a]"}, "invalid_glob"),
    ("/api/history", {"author": f"a{NUL}"}, "invalid_text"),
    ("/api/history", {"collection": f"a{NUL}"}, "invalid_text"),
    ("/api/collections/no%00tes", None, "invalid_text"),
    ("/api/jobs/a%00b", None, "invalid_text"),
    ("/api/status", {"section": f"a{NUL}"}, "invalid_text"),
]


@pytest.mark.parametrize("url, params, code", API_CASES, ids=[f"{u}-{i}" for i, (u, _, _) in enumerate(API_CASES)])
def test_api_refuses_bad_text_and_globs_with_422(api, url, params, code):
    response = api.get(url, params) if params else api.get(url)
    assert response.status_code == 422, response.content[:300]
    body = response.json()
    assert body["code"] == code and body["message"]


@pytest.mark.parametrize(
    "body, where",
    [
        ({"query": "x", "filters": {"tags": ["db", f"x{NUL}"]}}, "'filters.tags'"),
        ({"query": "x", "filters": {"fields": {f"st{NUL}": "draft"}}}, "'filters.fields'"),
        ({"query": "x", "filters": {"fields": {"status": ["draft", f"d{NUL}"]}}}, "'filters.fields.status'"),
    ],
)
def test_api_refuses_bad_text_in_a_json_body(api, body, where):
    import json

    response = api.post("/api/search", json.dumps(body), content_type="application/json")
    assert response.status_code == 422 and response.json()["code"] == "invalid_text"
    assert where in response.json()["message"]


def test_api_refuses_bad_text_in_writes_before_anything_changes(api, indexed_collection, corpus_dir):
    refused = api.put("/api/contexts", {"target": "pmd://notes/", "text": f"a{NUL}b"}, content_type="application/json")
    assert refused.status_code == 422 and refused.json()["code"] == "invalid_text"
    assert api.delete("/api/contexts?target=pmd://no%00tes/x").status_code == 422
    renamed = api.patch("/api/collections/notes", {"name": f"n{NUL}"}, content_type="application/json")
    assert renamed.status_code == 422
    assert [c["name"] for c in api.get("/api/collections").json()["items"]] == ["notes"]


def test_api_maps_a_database_data_error_to_400(api, indexed_collection, monkeypatch):
    import pmd_site.api.documents

    def refused(*args, **kwargs):
        raise DataError("invalid regular expression: invalid character range\nCONTEXT: somewhere")

    monkeypatch.setattr(pmd_site.api.documents, "document_page", refused)
    response = api.get("/api/get", {"ref": "a.md"})
    assert response.status_code == 400
    assert response.json() == {
        "message": "the database refused this input: invalid regular expression: invalid character range",
        "suggestions": [],
        "code": "input_refused",
    }


# --- the web UI: a problem page with a 4xx -----------------------------------------------------


@pytest.fixture
def browser(django_user_model):
    user = make_user("ana", password="pw-ana-12345", staff=True, is_superuser=True)
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.mark.parametrize(
    "url",
    [
        "/doc/p%00ub/a.md",
        "/related/p%00ub/a.md",
        "/raw/notes/a%00.md",
        "/d/ab%00cd",
        "/?q=a%00b",
        "/?q=x&collection=n%00",
        "/history/?q=a%00",
        "/history/?path=a%00",
        "/collections/n%00/share/",
    ],
)
def test_web_refuses_bad_text_with_a_4xx_page(browser, url):
    response = browser.get(url)
    assert 400 <= response.status_code < 500, (url, response.status_code)
    assert "NUL byte" in response.content.decode() or response.status_code == 400


def test_web_shows_an_invalid_glob_as_a_problem_not_a_500(browser, indexed_collection):
    history = browser.get("/history/?path=[z-a]")
    assert history.status_code == 200 and "runs backwards" in history.content.decode()
    search = browser.get("/?q=path:[z-a]+x")  # the search page shows a failed search as one of its states
    assert search.status_code == 200 and "runs backwards" in search.content.decode()


def test_web_maps_a_database_data_error_to_a_400_page(browser, indexed_collection, monkeypatch):
    import pmd_site.web.views.documents

    def refused(*args, **kwargs):
        raise DataError("invalid regular expression: x")

    monkeypatch.setattr(pmd_site.web.views.documents, "_resolve", refused)
    doc = indexed_collection.documents.filter(active=True).first()
    response = browser.get(f"/doc/notes/{doc.path}")
    assert response.status_code == 400
    assert "the database refused this input: invalid regular expression" in response.content.decode()


# --- MCP: a tool error -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tool, arguments",
    [
        ("pmd_search", {"query": f"a{NUL}"}),
        ("pmd_search", {"query": "x", "collections": [f"n{NUL}"]}),
        ("pmd_search", {"query": "x", "filters": {"tags": f"t{NUL}"}}),
        ("pmd_vector_search", {"query": f"a{NUL}"}),
        ("pmd_deep_search", {"query": f"a{NUL}"}),
        ("pmd_get", {"ref": f"pmd://n{NUL}/a.md"}),
        ("pmd_multi_get", {"pattern": f"n{NUL}/*"}),
        ("pmd_links", {"ref": f"pmd://n{NUL}/a.md"}),
        ("pmd_related", {"ref": f"pmd://n{NUL}/a.md"}),
        ("pmd_search_history", {"query": "x", "path": f"a{NUL}"}),
    ],
)
def test_mcp_tools_refuse_bad_text_with_a_tool_error(db, tool, arguments):
    from mcp.server.mcpserver.exceptions import ToolError

    from pmd_site.mcp.server import create_server

    server = create_server()
    with pytest.raises(ToolError, match="NUL byte"):
        anyio.run(server.call_tool, tool, arguments)


def test_mcp_maps_invalid_globs_and_data_errors_to_tool_errors(indexed_collection, monkeypatch):
    import django.db
    from mcp.server.mcpserver.exceptions import ToolError

    from pmd_site.mcp.errors import tool_call

    monkeypatch.setattr(django.db, "close_old_connections", lambda: None)  # keep the test's transaction

    @tool_call
    def multi_get(pattern: str):
        from indexing.selectors import documents_multi_get

        return documents_multi_get(pattern, access=Access.local_user())

    with pytest.raises(ToolError, match="runs backwards"):
        multi_get(pattern="notes/[z-a]")

    @tool_call
    def refused():
        raise DataError("invalid regular expression: x")

    with pytest.raises(ToolError, match="^the database refused this input: invalid regular expression: x$"):
        refused()


# --- the CLI: one line, exit status 1 ----------------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        (("search", "path:[z-a] x"), "runs backwards"),
        (("search", "x", "--path", "[[:nope:]]"), "unknown character class"),
        (("multi-get", "notes/[z-a]"), "runs backwards"),
        (("history", "x", "--path", "[z-a]"), "runs backwards"),
        (("search", f"a{NUL}b"), "NUL byte"),  # only a client-mode request can carry one
        (("search", "x", "--where", f"k=v{NUL}"), "NUL byte"),
    ],
)
def test_cli_refuses_bad_input_with_one_line_and_status_1(run_cli, db, args, message):
    code, _, err = run_cli(*args)
    assert code == 1 and message in err
    assert "DataError" not in err and "Traceback" not in err


def test_cli_maps_a_database_data_error_to_a_clear_message(run_cli, indexed_collection, monkeypatch):
    import indexing.selectors

    def refused(*args, **kwargs):
        raise DataError("invalid regular expression: x")

    monkeypatch.setattr(indexing.selectors, "document_page", refused)
    code, _, err = run_cli("get", "a.md")
    assert code == 1 and "the database refused this input: invalid regular expression: x" in err
    assert "DataError" not in err


def test_invalid_collection_masks_are_refused_when_the_collection_is_added(db, corpus_dir):
    from indexing.services.collections import collection_create

    with pytest.raises(InvalidGlob):
        collection_create(path=corpus_dir, name="bad", mask="**/[z-a].md")
    with pytest.raises(InvalidGlob):
        collection_create(path=corpus_dir, name="bad", ignore_patterns=["[[:nope:]]"])


def test_the_shared_check_names_the_parameter():
    from indexing.userinput import refuse_unstorable

    refuse_unstorable({"q": "fine", "n": 3, "tags": ["a", "b"], "fields": {"k": ["v"]}})
    with pytest.raises(InvalidText, match="^'q' contains an unpaired surrogate"):  # JSON can spell one
        refuse_unstorable({"q": "x\ud800"})
    with pytest.raises(InvalidText, match="^'fields.status' contains a NUL byte"):
        refuse_unstorable({"fields": {"status": ["ok", f"x{NUL}"]}})
