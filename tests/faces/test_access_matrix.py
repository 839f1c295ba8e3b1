"""Tests as a matrix: every face × every read operation, for every kind of principal.

Two collections from small folders: `handbook` (everyone) and `hr-secret` (shared with the group
`hr`), with one file of identical content in both (one Content row, two Documents: access must
follow the document's collection, not its content). The hidden collection holds a word found
nowhere else (SECRET_WORD) and words only its documents use (HIDDEN_QUERY).

Principals (PRINCIPALS): a member without access, a member with access through a group, a staff
member without access (read-only and write tokens), a superuser, tokens limited to `handbook` of
a user who sees both (a member and a superuser), the two members' web sessions, and two members
an identity provider made: one the provider puts in `hr`, one it took out of `hr` at
their latest sign-in.

For a principal who may not see `hr-secret`, every answer must: leave out its documents, counts,
contexts, jobs and problems; name neither it nor its secret word; and answer a request naming it
exactly as a request naming a collection that was never created (NEVER), after putting the one
name in place of the other. Faces: the JSON API (bearer tokens and sessions), MCP over HTTP
(JSON-RPC through pmd_site.asgi under uvicorn, as in test_mcp) and the CLI (the local user sees
everything). The web UI and the admin are covered in test_web_teams.py.

Writes: every API write (collections and contexts; a member's own saved searches, answers,
ratings and opened results) is refused to every read-only token with the same 403; write tokens
and web sessions change only what is their user's own. Notes (the API's /api/notes and MCP's
write tools) are written only by a write token of a writer of a writable collection: both
collections are writable, `writer` is a writer of both but sees only `handbook`; every other
principal is refused, and one who does not see `hr-secret` gets the answer of a collection never
created.

The world is built once for the module and committed (the MCP server's threads read it); every
test runs in a transaction rolled back afterwards, and the module's teardown empties the tables
it wrote to.
"""

from __future__ import annotations

import json
import shutil
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from django.test import Client

from indexing.access import Access
from tests.support.factories import make_user, write_notes
from tests.support.mcp_client import serve_asgi

pytestmark = pytest.mark.django_db

HIDDEN = "hr-secret"
NEVER = "hr-secrex"  # a name that was never created, as close to HIDDEN as a typo
SECRET_WORD = "zanzibarquux"  # only in hr-secret's documents, contexts, jobs and problems
HIDDEN_QUERY = "salary bands compensation"  # words only hr-secret's documents use
SHARED_QUERY = "vacation days"  # in common/faq.md, the file both collections hold
NEVER_DOCID = "#fedcba"
HIDDEN_FIELD = "pay_grade"  # a frontmatter field only hidden notes have
NEVER_FIELD = "pay_grado"

HANDBOOK_FILES = {
    "welcome.md": "# Welcome to the handbook\n\nStart here: onboarding checklist, office hours and the team "
    "calendar.\n",
    "policies/expenses.md": "# Expense reports\n\nSubmit receipts within a month; travel needs approval "
    "from your lead.\n",
}
HIDDEN_FILES = {
    "salaries.md": f"---\n{HIDDEN_FIELD}: L5\n---\n# Salary bands\n\nThe {SECRET_WORD} salary bands for engineers, "
    "reviewed every spring by the "
    "compensation panel.\n",
    "reviews/2025.md": f"# Performance reviews 2025\n\n{SECRET_WORD} calibration notes: promotions, salary bands "
    "and compensation ratings.\n",
}
SHARED_PATH = "common/faq.md"
SHARED_BODY = (
    "# Frequently asked questions\n\nHow do I request vacation days? Ask your lead, then record the "
    "vacation days in the team calendar.\n"
)


@dataclass(frozen=True)
class Principal:
    name: str
    user: str
    sees_hidden: bool
    staff: bool = False
    session: bool = False  # the web session instead of a bearer token (API only)


PRINCIPALS = {
    p.name: p
    for p in [
        Principal("outsider", "outsider", sees_hidden=False),
        Principal("insider", "insider", sees_hidden=True),
        Principal("staffer", "staffer", sees_hidden=False, staff=True),
        Principal("staffer_write", "staffer", sees_hidden=False, staff=True),
        Principal("root", "root", sees_hidden=True, staff=True),
        Principal("insider_limited", "insider", sees_hidden=False),  # token limited to handbook
        Principal("root_limited", "root", sees_hidden=False, staff=True),  # superuser's token limited to handbook
        Principal("outsider_session", "outsider", sees_hidden=False, session=True),
        Principal("insider_session", "insider", sees_hidden=True, session=True),
        Principal("provider_insider", "sso-insider", sees_hidden=True),  # in hr at the provider
        Principal("provider_leaver", "sso-leaver", sees_hidden=False),  # was in hr; the provider took them out
    ]
}
TOKEN_PRINCIPALS = [n for n, p in PRINCIPALS.items() if not p.session]
READ_ONLY_TOKENS = [n for n in TOKEN_PRINCIPALS if n != "staffer_write"]
NON_SEERS = [n for n, p in PRINCIPALS.items() if not p.sees_hidden]

# Jobs each principal sees (staff: every job of the collections they see; members: the ones they started).
JOBS_SEEN = {
    "outsider": {"handbook_outsider"},
    "insider": {"hidden_insider", "handbook_insider"},
    "staffer": {"handbook_outsider", "handbook_insider", "handbook_cli"},
    "root": {
        "hidden_cli",
        "hidden_outsider",
        "hidden_insider",
        "handbook_outsider",
        "handbook_insider",
        "handbook_cli",
    },
    "insider_limited": {"handbook_insider"},
    "root_limited": {"handbook_outsider", "handbook_insider", "handbook_cli"},
}
JOBS_SEEN["staffer_write"] = JOBS_SEEN["staffer"]
JOBS_SEEN["outsider_session"] = JOBS_SEEN["outsider"]
JOBS_SEEN["insider_session"] = JOBS_SEEN["insider"]
JOBS_SEEN["provider_insider"] = JOBS_SEEN["provider_leaver"] = set()


def assert_no_leak(text: str, where: str = "") -> None:
    """Neither the hidden collection's name nor its secret word, anywhere."""
    assert HIDDEN not in text, f"{where}: names {HIDDEN}: {text[:2000]}"
    assert SECRET_WORD not in text, f"{where}: shows {SECRET_WORD}: {text[:2000]}"


def same_as_never(hidden_text: str, never_text: str, where: str = "") -> None:
    """The answer about HIDDEN is the answer about NEVER, one name for the other; and that one
    (which names only what the caller typed) tells nothing about the hidden collection."""
    assert hidden_text.replace(HIDDEN, "NAME") == never_text.replace(NEVER, "NAME"), where
    assert_no_leak(never_text, where)


# --- the world ---------------------------------------------------------------------------------


@dataclass
class World:
    root: Path
    tokens: dict[str, str] = field(default_factory=dict)  # principal → raw token
    users: dict = field(default_factory=dict)
    docids: dict[str, str] = field(default_factory=dict)  # "salaries", "shared", "welcome"
    jobs: dict[str, str] = field(default_factory=dict)  # key → job id
    expired: str = ""

    def client(self, principal: str) -> Client:
        p = PRINCIPALS[principal]
        if p.session:
            from django.contrib.auth import get_user_model

            client = Client()
            client.force_login(get_user_model().objects.get(username=p.user))
            return client
        return Client(HTTP_AUTHORIZATION=f"Bearer {self.tokens[principal]}")


def _write_folder(folder: Path, files: dict[str, str]) -> None:
    write_notes(folder, {**files, SHARED_PATH: SHARED_BODY})


def _llm_settings(url: str) -> dict:
    """What the `ollama` fixture sets, for the whole module (the world is embedded once)."""
    return {
        "PMD_LLM_BACKEND": "ollama",
        "OLLAMA_URL": url,
        "PMD_EMBED_MODEL": "embeddinggemma",
        "PMD_EMBED_QUERY_PROMPT": "",
        "PMD_EMBED_DOC_PROMPT": "",
        "PMD_LLM_TIMEOUT": 10.0,
        "PMD_LLM_RETRIES": 2,
        "PMD_LLM_RETRY_BACKOFF": 0.01,
        "PMD_GENERATE_MODEL": "off",
        "PMD_RERANK_MODEL": "off",
    }


def _build_world(root: Path) -> World:
    from django.contrib.auth.models import Group
    from django.utils import timezone

    from indexing.models import ApiToken, Collection, Document, FileProblem, Job
    from indexing.services.contexts import context_set
    from indexing.services.embedding import embed_pending
    from indexing.services.jobs import job_create
    from indexing.services.refresh import collection_add
    from indexing.services.sharing import (
        collection_share,
        group_create,
        group_members_change,
    )
    from indexing.services.tokens import token_create

    local = Access.local_user()
    world = World(root=root)
    world.users = {
        "outsider": make_user("outsider"),
        "insider": make_user("insider"),
        "staffer": make_user("staffer", staff=True),
        "root": make_user("root", email="root@example.org", superuser=True),
        "writer": make_user("writer"),
    }
    _write_folder(root / "src-a", HANDBOOK_FILES)
    _write_folder(root / "src-b", HIDDEN_FILES)
    handbook = collection_add(path=root / "src-a", name="handbook", access=local).collection
    hidden = collection_add(path=root / "src-b", name=HIDDEN, access=local).collection
    group_create(name="hr", access=local)
    group_members_change(name="hr", users=["insider"], access=local, add=True)
    collection_share(name=HIDDEN, access=local, visibility=Collection.Visibility.SHARED, groups=["hr"])
    from indexing.services.sharing import collection_writers

    for name in ("handbook", HIDDEN):  # `writer` may write in both, but sees only handbook
        collection_writers(name=name, access=local, writable=True, users=["writer"])
    assert Group.objects.get(name="hr").user_set.get() == world.users["insider"]
    # Members an OpenID provider made: their hr membership is the provider's word at each sign-in.
    from indexing.services.accounts import ProviderSignIn, provider_sign_in

    def provider_says(name, groups):
        return provider_sign_in(
            signin=ProviderSignIn(provider="openid:matrix", subject=f"sub-{name}", username=name, groups=groups)
        )

    world.users["sso-insider"] = provider_says("sso-insider", ["hr", "choir"])
    provider_says("sso-leaver", ["hr"])
    world.users["sso-leaver"] = provider_says("sso-leaver", ["choir"])
    embed_pending()

    context_set(target="/", text="Company knowledge base", access=local)
    context_set(target="pmd://handbook/", text="The team handbook, for everyone", access=local)
    context_set(target=f"pmd://{HIDDEN}/", text=f"HR only: {SECRET_WORD} compensation data", access=local)
    context_set(target=f"pmd://{HIDDEN}/common/", text=f"{SECRET_WORD} answers for HR", access=local)
    FileProblem.objects.create(
        collection=hidden,
        path=f"broken-{SECRET_WORD}.md",
        severity="error",
        message=f"could not read broken-{SECRET_WORD}.md",
    )

    for key, collection, who in [
        ("hidden_cli", hidden, None),
        ("hidden_outsider", hidden, "outsider"),
        ("hidden_insider", hidden, "insider"),
        ("handbook_outsider", handbook, "outsider"),
        ("handbook_insider", handbook, "insider"),
        ("handbook_cli", handbook, None),
    ]:
        message = f"scanning {SECRET_WORD}" if collection == hidden else "scanning the handbook"
        job = job_create(
            kind=Job.Kind.INDEX, collection=collection, message=message, created_by=world.users[who] if who else None
        )
        world.jobs[key] = str(job.pk)

    for principal, user, write, limited in [
        ("outsider", "outsider", False, []),
        ("insider", "insider", False, []),
        ("staffer", "staffer", False, []),
        ("staffer_write", "staffer", True, []),
        ("root", "root", False, []),
        ("insider_limited", "insider", False, ["handbook"]),
        ("root_limited", "root", False, ["handbook"]),
        ("provider_insider", "sso-insider", False, []),
        ("provider_leaver", "sso-leaver", False, []),
        # the note writers' matrix: tokens that are not principals of the read matrix
        ("writer_write", "writer", True, []),
        ("writer_read", "writer", False, []),
        ("outsider_write", "outsider", True, []),
        ("insider_write", "insider", True, []),
        ("root_write", "root", True, []),
        ("root_write_limited", "root", True, ["handbook"]),
    ]:
        world.tokens[principal] = token_create(
            user=user, name=principal, access=local, can_write=write, collections=limited
        ).raw
    expired = token_create(user="insider", name="expired", access=local, expires_in="1h")
    ApiToken.objects.filter(pk=expired.token.pk).update(expires=timezone.now() - timedelta(minutes=5))
    world.expired = expired.raw

    docs = {(d.collection.name, d.path): d for d in Document.objects.select_related("collection")}
    world.docids = {
        "salaries": docs[(HIDDEN, "salaries.md")].docid,
        "welcome": docs[("handbook", "welcome.md")].docid,
        "shared": docs[("handbook", SHARED_PATH)].docid,
    }
    # One content, two documents, one docid: what the `#docid` cases are about.
    assert docs[(HIDDEN, SHARED_PATH)].content_id == docs[("handbook", SHARED_PATH)].content_id
    assert docs[(HIDDEN, SHARED_PATH)].docid == world.docids["shared"]
    assert NEVER_DOCID[1:] not in {d.docid for d in docs.values()}
    return world


def _empty_tables() -> None:
    """Empty the tables the world wrote to, as a transactional test's flush would, but keep content
    types and permissions (their ids sit in ContentType's cache, which later tests rely on)."""
    from django.apps import apps
    from django.db import connection

    kept = {"django_content_type", "auth_permission"}
    tables = sorted(
        {
            m._meta.db_table
            for m in apps.get_models(include_auto_created=True)
            if m._meta.app_label in {"admin", "auth", "sessions", "indexing", "search"}
        }
        - kept
    )
    existing = set(connection.introspection.table_names())
    with connection.cursor() as cursor:
        # Connections the MCP server's worker threads kept open would block TRUNCATE.
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        cursor.execute(
            "TRUNCATE " + ", ".join(connection.ops.quote_name(t) for t in tables if t in existing) + " CASCADE"
        )


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, ollama_server, tmp_path_factory):
    from django.test import override_settings

    from pmd_site.mcp import instructions

    overrides = override_settings(**_llm_settings(ollama_server.url))
    overrides.enable()
    instructions._cache.clear()
    try:
        with django_db_blocker.unblock():
            built = _build_world(tmp_path_factory.mktemp("access-matrix"))
        yield built
    finally:
        with django_db_blocker.unblock():
            _empty_tables()
        instructions._cache.clear()
        overrides.disable()


# --- the JSON API: reads -----------------------------------------------------------------------


def _body(response) -> dict:
    return json.loads(response.content)


def _uris(response) -> list[str]:
    body = _body(response)
    return [r["uri"] for r in body.get("results", body.get("documents", []))]


def _without_timings(response) -> str:
    body = _body(response)
    body.pop("timings_ms", None)
    body.pop("search_id", None)  # this search's own entry in the search log: one per request
    return json.dumps(body)


def _visible_uris(uris: list[str], p: Principal) -> None:
    """Only handbook's documents for a principal who may not see the hidden collection."""
    if not p.sees_hidden:
        assert all(u.startswith("pmd://handbook/") for u in uris), uris


API_READS = {}


def api_read(fn):
    API_READS[fn.__name__] = fn
    return fn


def _search(client, mode: str, query: str, **extra):
    body = {"query": query, "limit": 50, **extra}
    if mode == "query":
        body.setdefault("rerank", False)
        body.setdefault("expand", False)
    url = {"search": "/api/search", "vsearch": "/api/vsearch", "query": "/api/query"}[mode]
    return client.post(url, body, content_type="application/json")


@api_read
def search_get_secret_word(client, p, w):
    """GET /api/search by the hidden collection's own word: nothing, not even a warning about it."""
    response = client.get("/api/search", {"q": SECRET_WORD})
    assert response.status_code == 200, response.content
    uris = _uris(response)
    if p.sees_hidden:
        assert f"pmd://{HIDDEN}/salaries.md" in uris
    else:
        assert uris == [] and _body(response)["warnings"] == []
    text = _without_timings(response)
    return text.replace(f'"query": "{SECRET_WORD}"', "")  # the caller's own query, echoed


@api_read
def search_post_hidden_words(client, p, w):
    response = _search(client, "search", HIDDEN_QUERY, explain=True)
    assert response.status_code == 200, response.content
    uris = _uris(response)
    assert (f"pmd://{HIDDEN}/salaries.md" in uris) is p.sees_hidden, uris
    _visible_uris(uris, p)
    return _without_timings(response)


@api_read
def search_shared_content(client, p, w):
    """The identical file: one hit per collection the caller sees, the same content behind both."""
    response = client.get("/api/search", {"q": SHARED_QUERY, "limit": 50})
    assert response.status_code == 200, response.content
    uris = set(_uris(response))
    expected = {f"pmd://handbook/{SHARED_PATH}"} | ({f"pmd://{HIDDEN}/{SHARED_PATH}"} if p.sees_hidden else set())
    assert uris == expected
    return _without_timings(response)


@api_read
def vsearch_hidden_words(client, p, w):
    response = _search(client, "vsearch", HIDDEN_QUERY)
    assert response.status_code == 200, response.content
    uris = _uris(response)
    assert uris, "vector search always has nearest documents"
    assert (uris[0] in {f"pmd://{HIDDEN}/salaries.md", f"pmd://{HIDDEN}/reviews/2025.md"}) is p.sees_hidden, uris
    _visible_uris(uris, p)
    return _without_timings(response)


@api_read
def vsearch_shared_content(client, p, w):
    response = _search(client, "vsearch", SHARED_QUERY)
    assert response.status_code == 200, response.content
    uris = _uris(response)
    assert f"pmd://handbook/{SHARED_PATH}" in uris
    assert (f"pmd://{HIDDEN}/{SHARED_PATH}" in uris) is p.sees_hidden
    _visible_uris(uris, p)
    return _without_timings(response)


@api_read
def query_hidden_words(client, p, w):
    response = _search(client, "query", HIDDEN_QUERY, explain=True)
    assert response.status_code == 200, response.content
    uris = _uris(response)
    assert uris
    assert uris[0].startswith(f"pmd://{HIDDEN}/") is p.sees_hidden, uris
    _visible_uris(uris, p)
    return _without_timings(response)


@api_read
def query_get_mode_query(client, p, w):
    """GET /api/search?mode=query: hybrid through the GET form too."""
    response = client.get("/api/search", {"q": HIDDEN_QUERY, "mode": "query", "rerank": False, "expand": False})
    assert response.status_code == 200, response.content
    uris = _uris(response)
    assert uris and uris[0].startswith(f"pmd://{HIDDEN}/") is p.sees_hidden, uris
    _visible_uris(uris, p)
    return _without_timings(response)


@api_read
def query_document_typed_searches(client, p, w):
    """A query document (lex:/vec: lines): each typed search is read within what the caller sees."""
    response = _search(client, "query", "lex: salary bands\nvec: compensation panel for engineers")
    assert response.status_code == 200, response.content
    uris = _uris(response)
    assert uris and uris[0].startswith(f"pmd://{HIDDEN}/") is p.sees_hidden, uris
    _visible_uris(uris, p)
    return _without_timings(response)


SYNTAX_TRICKS = [
    f'"{SECRET_WORD}"',  # a required phrase
    f"{SECRET_WORD[:7]}*",  # a prefix
    f"{SECRET_WORD} -welcome",  # with an exclusion
    f"-welcome {SECRET_WORD} -calendar",
    f"collection:{HIDDEN} {SECRET_WORD}",
    f"pmd://{HIDDEN}/salaries.md {SECRET_WORD}",
    f"{HIDDEN} salaries",
    "#{salaries} " + SECRET_WORD,  # the hidden document's docid
    f"{SECRET_WORD} OR handbook",
    f"({SECRET_WORD}) & !x | salary:*",
]


def _syntax_op(index: int):
    def op(client, p, w):
        query = SYNTAX_TRICKS[index].replace("{salaries}", w.docids["salaries"])
        echoes = []
        for mode in ("search", "query"):
            response = _search(client, mode, query)
            assert response.status_code == 200, (mode, response.content)
            uris = _uris(response)
            if p.sees_hidden:
                assert f"pmd://{HIDDEN}/salaries.md" in uris, (mode, query, uris)
            _visible_uris(uris, p)
            text = _without_timings(response).replace(json.dumps(query), "")
            for token in sorted(query.split(), key=len, reverse=True):  # the caller's own words, quoted back
                text = text.replace(token, "")
            echoes.append(text)
        return " ".join(echoes)

    op.__name__ = f"search_syntax_{index}"
    return op


for _i in range(len(SYNTAX_TRICKS)):
    api_read(_syntax_op(_i))


def _filter_op(name: str, call, status: int = 404, code: str | None = "collection_not_found"):
    """A read restricted to the hidden collection: answered exactly as for NEVER (for a search,
    404 collection_not_found with no suggestion)."""

    def op(client, p, w):
        hidden = call(client, HIDDEN)
        if p.sees_hidden:
            assert hidden.status_code == 200, hidden.content
            assert _uris(hidden) or _body(hidden).get("uri"), hidden.content
            return
        never = call(client, NEVER)
        assert hidden.status_code == never.status_code == status, hidden.content
        if code:
            assert _body(hidden)["code"] == code
            assert _body(hidden)["suggestions"] == []
        same_as_never(hidden.content.decode(), never.content.decode(), name)

    op.__name__ = f"collection_filter_{name}"
    return op


for _name, (_call, *_expected) in {
    "search_post": (lambda c, n: _search(c, "search", "salary", collections=[n]),),
    "search_get": (lambda c, n: c.get("/api/search", {"q": "salary", "collection": n}),),
    "vsearch": (lambda c, n: _search(c, "vsearch", "salary", collections=[n]),),
    "query": (lambda c, n: _search(c, "query", "salary", collections=[n]),),
    "query_get": (
        lambda c, n: c.get(
            "/api/search", {"q": "salary", "mode": "query", "collection": n, "rerank": False, "expand": False}
        ),
    ),
    "with_visible_one": (lambda c, n: _search(c, "search", "salary", collections=["handbook", n]),),
    "padded_name": (lambda c, n: _search(c, "search", "salary", collections=[f"  {n} "]),),
    "multi_get": (lambda c, n: c.get("/api/multi-get", {"pattern": "**", "collection": n}), 200, None),
    "get": (lambda c, n: c.get("/api/get", {"ref": "salaries.md", "collection": n}), 404, "document_not_found"),
}.items():
    api_read(_filter_op(_name, _call, *_expected))


@api_read
def search_by_a_field_only_hidden_notes_have(client, p, w):
    """`field:value` over a frontmatter field only the hidden notes have: answered as for a field no note has."""
    for mode in ("search", "query"):
        hidden = _search(client, mode, f"{HIDDEN_FIELD}:L5 salary")
        assert hidden.status_code == 200, hidden.content
        if p.sees_hidden:
            assert f"pmd://{HIDDEN}/salaries.md" in _uris(hidden), (mode, hidden.content)
            continue
        never = _search(client, mode, f"{NEVER_FIELD}:L5 salary")
        assert _uris(hidden) == _uris(never)
        _visible_uris(_uris(hidden), p)
        hidden_warnings = [m.replace(HIDDEN_FIELD, "FIELD") for m in _body(hidden)["warnings"]]
        assert hidden_warnings == [m.replace(NEVER_FIELD, "FIELD") for m in _body(never)["warnings"]]
        if mode == "search":  # keyword scores too (a vector of other words scores otherwise, rightly)
            assert _without_timings(hidden).replace(HIDDEN_FIELD, "FIELD") == _without_timings(never).replace(
                NEVER_FIELD, "FIELD"
            )


def _not_found_op(name: str, hidden_ref, never_ref, code: str, *, seer_collection: str = HIDDEN):
    """GET /api/get of something in the hidden collection: 404 exactly as for NEVER."""

    def op(client, p, w):
        ref = hidden_ref(w)
        hidden = client.get("/api/get", {"ref": ref})
        if p.sees_hidden:
            assert hidden.status_code == 200, hidden.content
            assert _body(hidden)["collection"] == seer_collection
            return
        never = client.get("/api/get", {"ref": never_ref(w)})
        assert hidden.status_code == never.status_code == 404, hidden.content
        assert _body(hidden)["code"] == code
        assert _body(never)["code"] == code
        if never_ref(w) == ref.replace(HIDDEN, NEVER):
            same_as_never(hidden.content.decode(), never.content.decode(), name)
        else:
            hidden_text = hidden.content.decode().replace(ref, "REF")
            never_text = never.content.decode().replace(never_ref(w), "REF")
            assert hidden_text == never_text
            assert_no_leak(hidden_text, name)

    op.__name__ = f"get_{name}"
    return op


api_read(
    _not_found_op(
        "by_uri",
        lambda w: f"pmd://{HIDDEN}/salaries.md",
        lambda w: f"pmd://{NEVER}/salaries.md",
        "collection_not_found",
    )
)
api_read(
    _not_found_op(
        "by_uri_with_line",
        lambda w: f"pmd://{HIDDEN}/salaries.md:3",
        lambda w: f"pmd://{NEVER}/salaries.md:3",
        "collection_not_found",
    )
)
api_read(
    _not_found_op(
        "by_collection_path", lambda w: f"{HIDDEN}/salaries.md", lambda w: f"{NEVER}/salaries.md", "document_not_found"
    )
)
api_read(
    _not_found_op("by_hidden_docid", lambda w: f"#{w.docids['salaries']}", lambda w: NEVER_DOCID, "document_not_found")
)
api_read(
    _not_found_op(
        "by_folder_path",
        lambda w: str(w.root / "src-b" / "salaries.md"),
        lambda w: str(w.root / "src-c" / "salaries.md"),
        "document_not_found",
    )
)


@api_read
def get_path_tricks(client, p, w):
    """Odd spellings of a hidden document's address: answered as the same spelling of NEVER."""
    refs = [
        f"pmd://{HIDDEN}/./salaries.md",
        f"pmd://{HIDDEN}//salaries.md",
        f"pmd://handbook/../{HIDDEN}/salaries.md",
        f"handbook/../{HIDDEN}/salaries.md",
        f"./{HIDDEN}/salaries.md",
        f"pmd://{HIDDEN}/salaries.md:2",
        f"  pmd://{HIDDEN}/salaries.md  ",
        f"pmd://{HIDDEN}/SALARIES.md",
        f"{HIDDEN}/reviews/2025.md",
    ]
    for ref in refs:
        hidden = client.get("/api/get", {"ref": ref})
        if p.sees_hidden:
            assert hidden.status_code in {200, 404}, (ref, hidden.content)
            continue
        never = client.get("/api/get", {"ref": ref.replace(HIDDEN, NEVER)})
        assert hidden.status_code == never.status_code == 404, (ref, hidden.content)
        same_as_never(hidden.content.decode(), never.content.decode(), ref)
    if p.sees_hidden:
        assert client.get("/api/get", {"ref": refs[0]}).json()["uri"] == f"pmd://{HIDDEN}/salaries.md"


@api_read
def get_by_bare_hidden_path(client, p, w):
    response = client.get("/api/get", {"ref": "salaries.md"})
    if p.sees_hidden:
        assert response.status_code == 200 and _body(response)["collection"] == HIDDEN
        return None
    assert response.status_code == 404 and _body(response)["code"] == "document_not_found"
    return response.content.decode()


@api_read
def get_shared_content_by_docid(client, p, w):
    """The docid both collections' copies share: a member without access gets handbook's, never the other."""
    response = client.get("/api/get", {"ref": f"#{w.docids['shared']}"})
    assert response.status_code == 200, response.content
    body = _body(response)
    assert body["lines"] == SHARED_BODY.splitlines()
    if not p.sees_hidden:
        assert body["collection"] == "handbook" and body["uri"] == f"pmd://handbook/{SHARED_PATH}"
        assert body["context"] == ["Company knowledge base", "The team handbook, for everyone"]
    return response.content.decode()


@api_read
def get_shared_content_by_bare_path(client, p, w):
    response = client.get("/api/get", {"ref": SHARED_PATH})
    assert response.status_code == 200, response.content
    if not p.sees_hidden:
        assert _body(response)["uri"] == f"pmd://handbook/{SHARED_PATH}"
    return response.content.decode()


@api_read
def get_shared_content_in_hidden_collection(client, p, w):
    """The hidden copy by its own address: with the hidden collection's contexts, or not at all."""
    response = client.get("/api/get", {"ref": f"pmd://{HIDDEN}/{SHARED_PATH}"})
    if p.sees_hidden:
        assert response.status_code == 200
        assert _body(response)["context"][-1] == f"{SECRET_WORD} answers for HR"
        return None
    assert response.status_code == 404
    return response.content.decode().replace(HIDDEN, NEVER)  # the caller's own words, echoed


@api_read
def get_visible_document(client, p, w):
    """A positive control: everyone reads handbook's documents, by every kind of reference."""
    for ref in ("pmd://handbook/welcome.md", "handbook/welcome.md", "welcome.md", f"#{w.docids['welcome']}"):
        response = client.get("/api/get", {"ref": ref})
        assert response.status_code == 200, (ref, response.content)
        assert _body(response)["uri"] == "pmd://handbook/welcome.md"
    return response.content.decode()


@api_read
def get_typo_suggestions(client, p, w):
    """Suggestions come from what the caller sees: a near-miss of the hidden collection's document."""
    response = client.get("/api/get", {"ref": "salarie.md"})
    assert response.status_code == 404
    suggestions = _body(response)["suggestions"]
    assert (f"pmd://{HIDDEN}/salaries.md" in suggestions) is p.sees_hidden, suggestions
    return response.content.decode()


@api_read
def multi_get_glob_everything(client, p, w):
    response = client.get("/api/multi-get", {"pattern": "**", "max_bytes": 100_000})
    assert response.status_code == 200, response.content
    uris = set(_uris(response))
    expected = {f"pmd://handbook/{p_}" for p_ in [*HANDBOOK_FILES, SHARED_PATH]}
    if p.sees_hidden:
        expected |= {f"pmd://{HIDDEN}/{p_}" for p_ in [*HIDDEN_FILES, SHARED_PATH]}
    assert uris == expected
    return response.content.decode()


@api_read
def multi_get_glob_by_file_name(client, p, w):
    response = client.get("/api/multi-get", {"pattern": "**/faq.md"})
    assert response.status_code == 200, response.content
    assert len(_uris(response)) == (2 if p.sees_hidden else 1)
    _visible_uris(_uris(response), p)
    return response.content.decode()


@api_read
def multi_get_glob_of_hidden_collection(client, p, w):
    hidden = client.get("/api/multi-get", {"pattern": f"{HIDDEN}/**"})
    assert hidden.status_code == 200, hidden.content
    if p.sees_hidden:
        assert len(_uris(hidden)) == 3
        return
    never = client.get("/api/multi-get", {"pattern": f"{NEVER}/**"})
    assert _body(hidden)["documents"] == [] and _body(hidden)["missing"] == [f"{HIDDEN}/**"]
    same_as_never(hidden.content.decode(), never.content.decode(), "multi-get glob")


@api_read
def multi_get_comma_list(client, p, w):
    refs = [
        f"pmd://{HIDDEN}/salaries.md",
        f"#{w.docids['salaries']}",
        f"{HIDDEN}/reviews/2025.md",
        f"#{w.docids['shared']}",
        "handbook/welcome.md",
    ]
    response = client.get("/api/multi-get", {"pattern": ",".join(refs)})
    assert response.status_code == 200, response.content
    body = _body(response)
    uris = [d["uri"] for d in body["documents"]]
    if p.sees_hidden:
        assert f"pmd://{HIDDEN}/salaries.md" in uris and f"pmd://{HIDDEN}/reviews/2025.md" in uris
        assert body["missing"] == []
        return None
    assert uris == [f"pmd://handbook/{SHARED_PATH}", "pmd://handbook/welcome.md"]
    assert body["missing"] == refs[:3]
    body["missing"] = []  # the caller's own references, echoed
    return json.dumps(body)


@api_read
def collections_list(client, p, w):
    response = client.get("/api/collections")
    assert response.status_code == 200, response.content
    body = _body(response)
    names = [c["name"] for c in body["items"]]
    assert names == (["handbook", HIDDEN] if p.sees_hidden else ["handbook"])
    assert body["count"] == len(names)
    return response.content.decode()


@api_read
def collection_detail(client, p, w):
    assert client.get("/api/collections/handbook").status_code == 200
    hidden = client.get(f"/api/collections/{HIDDEN}")
    if p.sees_hidden:
        assert hidden.status_code == 200 and _body(hidden)["documents"] == 3
        return
    never = client.get(f"/api/collections/{NEVER}")
    assert hidden.status_code == 404 and _body(hidden)["code"] == "collection_not_found"
    same_as_never(hidden.content.decode(), never.content.decode(), "collection detail")


@api_read
def contexts_list(client, p, w):
    response = client.get("/api/contexts")
    assert response.status_code == 200, response.content
    targets = {c["target"] for c in _body(response)["items"]}
    expected = {"/", "pmd://handbook/"} | ({f"pmd://{HIDDEN}/", f"pmd://{HIDDEN}/common"} if p.sees_hidden else set())
    assert targets == expected
    return response.content.decode()


@api_read
def status_report(client, p, w):
    response = client.get("/api/status")
    assert response.status_code == 200, response.content
    index = _body(response)["index"]
    counts = {k: index[k] for k in ("collections", "documents", "contents", "contexts", "problems")}
    if p.sees_hidden:
        assert counts == {"collections": 2, "documents": 6, "contents": 5, "contexts": 4, "problems": 1}
    else:
        assert counts == {"collections": 1, "documents": 3, "contents": 3, "contexts": 2, "problems": 0}
    assert [c["name"] for c in index["by_collection"]] == (["handbook", HIDDEN] if p.sees_hidden else ["handbook"])
    embeddings = _body(response)["embeddings"]
    assert embeddings["embedded"] == counts["contents"] and embeddings["pending"] == 0
    assert (len(_body(response)["problems"]["recent"]) == 1) is p.sees_hidden
    return response.content.decode()


@api_read
def jobs(client, p, w):
    response = client.get("/api/jobs")
    assert response.status_code == 200, response.content
    by_id = {v: k for k, v in w.jobs.items()}
    seen = {by_id[j["id"]] for j in _body(response)["items"] if j["id"] in by_id}
    assert seen == JOBS_SEEN[p.name]
    assert _body(response)["count"] == len(seen)
    for key, job_id in w.jobs.items():
        detail = client.get(f"/api/jobs/{job_id}")
        if key in JOBS_SEEN[p.name]:
            assert detail.status_code == 200
            continue
        never = client.get(f"/api/jobs/{uuid.uuid4()}")
        assert detail.status_code == never.status_code == 404, key
        assert detail.content.decode().replace(job_id, "ID") == never.content.decode().replace(
            _body(never)["message"].rsplit(" ", 1)[-1], "ID"
        )
    return response.content.decode()


@pytest.mark.parametrize("op", list(API_READS))
@pytest.mark.parametrize("who", list(PRINCIPALS))
def test_api_read(world, who, op):
    """Every read of the API, for every principal: all of it with access, none of it (and no trace) without."""
    p = PRINCIPALS[who]
    text = API_READS[op](world.client(who), p, world)
    if text is not None and not p.sees_hidden:
        assert_no_leak(text, f"{who} {op}")


def test_every_read_answers_the_same_to_everyone_who_sees_the_same(world):
    """Who cannot see the hidden collection cannot tell it exists: a member, a staff member and two
    handbook-limited tokens get the same answers (scores included), token or session alike."""
    requests = [
        ("post", "/api/search", {"query": SHARED_QUERY + " onboarding", "explain": True}),
        # Hybrid before vector: hybrid embeds the query in a thread of its own (committed), which
        # would wait on the cache row a vector search had written in this test's open transaction.
        ("post", "/api/query", {"query": SHARED_QUERY, "rerank": False, "expand": False, "explain": True}),
        ("post", "/api/vsearch", {"query": SHARED_QUERY}),
        ("get", "/api/multi-get", {"pattern": "**"}),
        ("get", "/api/get", {"ref": f"#{world.docids['shared']}"}),
        ("get", "/api/contexts", None),
    ]
    answers = {}
    for who in NON_SEERS:
        client = world.client(who)
        for method, url, data in requests:
            if method == "post":
                response = client.post(url, data, content_type="application/json")
            else:
                response = client.get(url, data or {})
            assert response.status_code == 200, (who, url, response.content)
            answers.setdefault(url, {})[who] = _without_timings(response)
    for url, by_who in answers.items():
        assert len(set(by_who.values())) == 1, (url, by_who)


# --- the JSON API: writes ----------------------------------------------------------------------


def _writes(name: str) -> dict:
    return {
        "add": ("post", "/api/collections", {"path": "/nonexistent-folder", "name": "new-one"}),
        "rename": ("patch", f"/api/collections/{name}", {"name": "renamed"}),
        "delete": ("delete", f"/api/collections/{name}", None),
        "share": ("put", f"/api/collections/{name}/sharing", {"visibility": "everyone"}),
        "reindex": ("post", f"/api/collections/{name}/reindex", None),
        "embed": ("post", f"/api/collections/{name}/embed", None),
        "context_set": ("put", "/api/contexts", {"target": f"pmd://{name}/", "text": "changed"}),
        "context_remove": ("delete", f"/api/contexts?target=pmd://{name}/", None),
    }


WRITES = list(_writes("x"))


def _send(client, method: str, url: str, data):
    if data is None:
        return getattr(client, method)(url)
    return getattr(client, method)(url, data, content_type="application/json")


@pytest.mark.parametrize("write", WRITES)
@pytest.mark.parametrize("who", READ_ONLY_TOKENS)
def test_read_only_token_cannot_write(world, who, write):
    """403 forbidden, whoever the user (the superuser too), and the same answer whichever collection."""
    from indexing.models import Collection, PathContext

    client = world.client(who)
    answers = []
    for target in ("handbook", HIDDEN, NEVER):
        response = _send(client, *_writes(target)[write])
        assert response.status_code == 403, (target, response.content)
        assert _body(response)["code"] == "forbidden"
        answers.append(response.content.decode())
    assert len(set(answers)) == 1, answers
    assert_no_leak(answers[0])
    assert "read-only" in _body(response)["message"]
    assert sorted(Collection.objects.values_list("name", "visibility")) == [
        ("handbook", "everyone"),
        (HIDDEN, "shared"),
    ]
    assert PathContext.objects.filter(text="changed").count() == 0


@pytest.mark.parametrize("write", [w for w in WRITES if w != "add"])
def test_write_token_of_staff_without_access_gets_404_for_the_hidden_collection(world, write, eager_tasks):
    from indexing.models import Collection, Job, PathContext

    client = world.client("staffer_write")
    jobs_before = Job.objects.count()
    hidden = _send(client, *_writes(HIDDEN)[write])
    never = _send(client, *_writes(NEVER)[write])
    assert hidden.status_code == never.status_code == 404, hidden.content
    assert _body(hidden)["code"] == "collection_not_found"
    same_as_never(hidden.content.decode(), never.content.decode(), write)
    hidden_row = Collection.objects.get(name=HIDDEN)
    assert hidden_row.visibility == "shared" and hidden_row.documents.count() == 3
    assert PathContext.objects.filter(collection=hidden_row).count() == 2
    assert not PathContext.objects.filter(text="changed").exists()
    assert Job.objects.count() == jobs_before


@pytest.mark.parametrize("write", WRITES)
def test_write_token_of_staff_changes_a_visible_collection(world, write, eager_tasks, settings):
    settings.PMD_COLLECTION_ROOTS = [world.root]
    method, url, data = _writes("handbook")[write]
    copy = world.root / "src-copy"
    if write == "add":  # a folder of its own: one that is a collection already is refused
        _write_folder(copy, HANDBOOK_FILES)
        data = {"path": str(copy), "name": "handbook-copy"}
    try:
        response = _send(world.client("staffer_write"), method, url, data)
    finally:
        shutil.rmtree(copy, ignore_errors=True)  # the folders on disk outlive this test's database rows
    assert response.status_code in {200, 201, 202}, response.content
    assert_no_leak(response.content.decode())


def test_write_token_of_staff_cannot_place_contexts_by_the_hidden_collections_folder(world):
    """A context target given as a server folder: the hidden collection's folder is "not inside any
    collection", as a folder no collection holds; a visible collection's folder works."""
    client = world.client("staffer_write")
    answers = {}
    for folder in ("src-b", "src-c"):
        target = str(world.root / folder / "common")
        response = client.put("/api/contexts", {"target": target, "text": "changed"}, content_type="application/json")
        assert response.status_code == 400, response.content
        answers[folder] = response.content.decode().replace(target, "TARGET")
    assert answers["src-b"] == answers["src-c"]
    assert_no_leak(answers["src-b"])
    ok = client.put(
        "/api/contexts",
        {"target": str(world.root / "src-a" / "common"), "text": "FAQ"},
        content_type="application/json",
    )
    assert ok.status_code == 200 and ok.json()["target"] == "pmd://handbook/common"


def test_write_token_cannot_share_into_view_what_its_user_cannot_see(world):
    """A staff write token may change sharing of what its user sees, not make itself see more."""
    client = world.client("staffer_write")
    shared = client.put(
        f"/api/collections/{HIDDEN}/sharing",
        {"visibility": "shared", "users": ["staffer"]},
        content_type="application/json",
    )
    assert shared.status_code == 404
    assert client.get("/api/search", {"q": SECRET_WORD}).json()["results"] == []


def test_token_limits_are_within_what_the_user_sees(world):
    """A token cannot be limited to a collection its user does not see: not found, as for NEVER."""
    from indexing.errors import PmdError
    from indexing.services.tokens import token_create

    with pytest.raises(PmdError) as hidden:
        token_create(user="outsider", access=Access.local_user(), collections=[HIDDEN])
    with pytest.raises(PmdError) as never:
        token_create(user="outsider", access=Access.local_user(), collections=[NEVER])
    assert type(hidden.value) is type(never.value)
    assert str(hidden.value).replace(HIDDEN, "NAME") == str(never.value).replace(NEVER, "NAME")
    assert hidden.value.suggestions == never.value.suggestions == []
    limited = token_create(user="insider", access=Access.local_user(), collections=[HIDDEN]).raw
    client = Client(HTTP_AUTHORIZATION=f"Bearer {limited}")
    assert [c["name"] for c in client.get("/api/collections").json()["items"]] == [HIDDEN]


# --- the JSON API and the web: a member's own things (saved searches, answers, ratings) -------------


def _own_things(user, name: str = "mine") -> dict:
    """A saved search, a logged search and an answer of `user`, made in the test (rolled back)."""
    from indexing.models import Answer, SavedSearch, SearchLogEntry

    return {
        "saved": SavedSearch.objects.create(owner=user, name=name, query="vacation days"),
        "entry": SearchLogEntry.objects.create(
            user=user, face="api", mode="keyword", query="vacation days", results=1, latency_ms=1.0
        ),
        "answer": Answer.objects.create(user=user, question="How many vacation days?", text="Ask your lead."),
    }


def _member_writes(things: dict) -> dict:
    saved, entry = things["saved"].name, things["entry"].pk
    return {
        "saved_add": ("post", "/api/saved", {"name": "another", "query": SHARED_QUERY}),
        "saved_change": ("patch", f"/api/saved/{saved}", {"webhook_url": "https://hooks.example.org/x"}),
        "saved_run": ("post", f"/api/saved/{saved}/run", None),
        "saved_remove": ("delete", f"/api/saved/{saved}", None),
        "answer_delete": ("delete", f"/api/answers/{things['answer'].conversation}", None),
        "feedback": ("post", f"/api/searches/{entry}/feedback", {"uri": "pmd://handbook/welcome.md", "helpful": False}),
        "opened": ("post", f"/api/searches/{entry}/opened", {"uri": "pmd://handbook/welcome.md"}),
    }


MEMBER_WRITES = ["saved_add", "saved_change", "saved_run", "saved_remove", "answer_delete", "feedback", "opened"]


def _unchanged(things: dict) -> None:
    from indexing.models import Answer, SavedSearch, SearchFeedback, SearchLogEntry

    saved = SavedSearch.objects.get(pk=things["saved"].pk)
    assert (saved.webhook_url, saved.last_run, saved.seen) == ("", None, [])
    assert not SavedSearch.objects.filter(name="another").exists()
    assert SearchLogEntry.objects.get(pk=things["entry"].pk).opened_uri == ""
    assert not SearchFeedback.objects.filter(entry=things["entry"]).exists()
    assert Answer.objects.filter(pk=things["answer"].pk).exists()


@pytest.mark.parametrize("write", MEMBER_WRITES)
@pytest.mark.parametrize("who", READ_ONLY_TOKENS)
def test_read_only_token_cannot_change_even_its_users_own_things(world, who, write):
    """403 forbidden, the same error as for collections, and nothing changed (a run notes its results)."""
    things = _own_things(world.users[PRINCIPALS[who].user])
    response = _send(world.client(who), *_member_writes(things)[write])
    assert response.status_code == 403, response.content
    assert _body(response)["code"] == "forbidden" and "read-only" in _body(response)["message"]
    assert_no_leak(response.content.decode())
    _unchanged(things)


WRITE_TOKENS = {  # principal of the same user → how its write token is limited
    "outsider": [],
    "staffer": [],
    "insider_limited": ["handbook"],
}


@pytest.fixture(autouse=True)
def _webhook_host_resolves(monkeypatch):
    """The saved searches' webhook host resolves to a public address (no DNS here); no test sends to it."""
    from tests.support.resolver import resolve_as

    resolve_as(monkeypatch, {"hooks.example.org": "93.184.215.14"})


@pytest.mark.parametrize("write", MEMBER_WRITES)
@pytest.mark.parametrize("who", list(WRITE_TOKENS))
def test_write_token_changes_its_users_own_things_and_nobody_elses(world, who, write):
    """A write token (a member's, staff's without access, one limited to `handbook`) changes what is
    its user's own; another member's saved search, answer and logged search are not there for it."""
    from tests.support.factories import make_token

    user = world.users[PRINCIPALS[who].user]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {make_token(user, write=True, collections=WRITE_TOKENS[who])}")
    own = _send(client, *_member_writes(_own_things(user))[write])
    assert own.status_code in {200, 201, 204}, own.content
    assert own.status_code == 204 or _body(own).get("recorded", True) is True
    assert_no_leak(own.content.decode())

    other = "insider" if PRINCIPALS[who].user != "insider" else "outsider"
    theirs = _own_things(world.users[other], name="theirs")
    if write == "saved_add":
        return
    response = _send(client, *_member_writes(theirs)[write])
    if write in {"feedback", "opened"}:
        assert response.status_code == 200 and _body(response) == {"recorded": False}
    else:
        assert response.status_code == 404, response.content
    _unchanged(theirs)


def test_a_saved_search_of_the_hidden_collection_is_as_one_of_a_collection_never_created(world):
    """Saved through a write token of staff without access, and through one limited to `handbook`:
    running it answers as for NEVER, and its listing leaves the hidden collection out as NEVER."""
    from tests.support.factories import make_token

    for user, limit in [("staffer", []), ("insider", ["handbook"])]:
        client = Client(HTTP_AUTHORIZATION=f"Bearer {make_token(user, write=True, collections=limit)}")
        answers = {}
        for name in (HIDDEN, NEVER):
            made = client.post(
                "/api/saved",
                {"name": f"of {name}", "query": SECRET_WORD, "collections": [name]},
                content_type="application/json",
            )
            assert made.status_code == 201, made.content
            answers[name] = client.post(f"/api/saved/of {name}/run")
            assert answers[name].status_code == 404, answers[name].content
        same_as_never(answers[HIDDEN].content.decode(), answers[NEVER].content.decode(), user)
        listed = {row["name"]: row["collections"] for row in client.get("/api/saved").json()["saved"]}
        assert listed == {f"of {HIDDEN}": [], f"of {NEVER}": []}


def test_web_session_cannot_change_another_members_saved_search_or_answers(world):
    """Sessions are never read-only; what is another member's is not there for them (nothing changes)."""
    theirs = _own_things(world.users["insider"], name="theirs")
    client = world.client("outsider_session")
    assert client.post("/saved/theirs/digest/", {"webhook_url": "https://hooks.example.org/x"}).status_code == 302
    assert client.post("/saved/theirs/remove/").status_code == 302
    assert client.get("/saved/theirs/").status_code == 302  # not found: back to the list
    assert client.post(f"/ask/{theirs['answer'].conversation}/delete/").status_code == 404
    assert client.post("/api/saved/theirs/run").status_code == 404
    _unchanged(theirs)


# --- revocation, expiry, audit -------------------------------------------------------------------


def _revoke_by_sharing():
    from indexing.services.sharing import collection_share

    collection_share(name=HIDDEN, access=Access.local_user(), visibility="private")


def _revoke_by_group():
    from indexing.services.sharing import group_members_change

    group_members_change(name="hr", users=["insider"], access=Access.local_user(), add=False)


@pytest.mark.parametrize("revoke", [_revoke_by_sharing, _revoke_by_group], ids=["private", "left_group"])
def test_revoking_the_users_access_revokes_the_tokens_on_the_next_request(world, revoke):
    from indexing.services.tokens import token_create

    hidden_only = token_create(user="insider", access=Access.local_user(), collections=[HIDDEN]).raw
    clients = {
        "plain": world.client("insider"),
        "session": world.client("insider_session"),
        "limited": Client(HTTP_AUTHORIZATION=f"Bearer {hidden_only}"),
    }
    for client in clients.values():
        assert client.get("/api/get", {"ref": f"pmd://{HIDDEN}/salaries.md"}).status_code == 200
        assert client.get("/api/search", {"q": SECRET_WORD}).json()["results"]
    revoke()
    for name, client in clients.items():
        assert client.get("/api/get", {"ref": f"pmd://{HIDDEN}/salaries.md"}).status_code == 404, name
        search = client.get("/api/search", {"q": SECRET_WORD})
        assert search.json()["results"] == [], name
        listed = client.get("/api/collections").json()
        assert [c["name"] for c in listed["items"]] == ([] if name == "limited" else ["handbook"]), name
        assert_no_leak(client.get("/api/status").content.decode(), name)
    # A token limited to the collection it lost sees nothing at all, not "everything".
    limited = clients["limited"]
    assert limited.get("/api/search", {"q": SHARED_QUERY}).json()["results"] == []
    assert limited.get("/api/multi-get", {"pattern": "**"}).json()["documents"] == []
    assert limited.get("/api/status").json()["index"]["documents"] == 0


def test_expired_revoked_and_unknown_tokens_get_401(world):
    from indexing.services.tokens import token_create, token_revoke

    revoked = token_create(user="insider", access=Access.local_user())
    token_revoke(token=revoked.token.pk, access=Access.local_user())
    for raw in (world.expired, revoked.raw, "pmd_" + "x" * 40):
        client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
        for response in (
            client.get("/api/status"),
            client.get("/api/search", {"q": SECRET_WORD}),
            client.get("/api/get", {"ref": f"pmd://{HIDDEN}/salaries.md"}),
        ):
            assert response.status_code == 401, response.content
            assert _body(response)["code"] == "unauthorized"
            assert_no_leak(response.content.decode())


def test_audit_trail_records_sharing_and_tokens(world):
    from indexing.models import AuditEvent
    from indexing.services.tokens import token_create

    # The world's own changes, made by the local user.
    shared = AuditEvent.objects.filter(action="collection.share", target=HIDDEN).get()
    assert shared.actor is None and shared.actor_label.startswith("local user")
    assert shared.detail["visibility"] == "shared" and shared.detail["groups"] == ["hr"]
    assert AuditEvent.objects.filter(action="token.create").count() == len(world.tokens) + 1  # and the expired one

    root = world.users["root"]
    created = token_create(
        user=root, name="ops", access=Access.for_user(root), can_write=True, collections=["handbook"], expires_in="30d"
    )
    event = AuditEvent.objects.filter(action="token.create").first()
    assert event.actor == root and event.target.startswith(created.token.prefix)
    assert event.detail["write"] is True and event.detail["collections"] == ["handbook"] and event.detail["expires"]
    assert created.raw not in json.dumps(event.detail) + event.target

    client = Client(HTTP_AUTHORIZATION=f"Bearer {created.raw}")
    response = client.put(
        "/api/collections/handbook/sharing", {"visibility": "shared", "groups": ["hr"]}, content_type="application/json"
    )
    assert response.status_code == 200, response.content
    event = AuditEvent.objects.filter(action="collection.share").first()
    assert event.target == "handbook" and event.actor == root
    assert created.token.prefix in event.actor_label
    assert event.detail == {"visibility": "shared", "users": [], "groups": ["hr"]}
    # The write that was refused left no trace.
    before = AuditEvent.objects.count()
    assert (
        world.client("root")
        .put("/api/collections/handbook/sharing", {"visibility": "everyone"}, content_type="application/json")
        .status_code
        == 403
    )
    assert AuditEvent.objects.count() == before


# --- MCP over HTTP -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mcp_url(world, django_db_blocker):
    """pmd_site.asgi.application under uvicorn on loopback, in a thread of this process
    (tests/support/mcp_client.py)."""
    server = serve_asgi()
    base_url = server.__enter__()
    yield f"{base_url}/mcp"
    with django_db_blocker.unblock():  # its exit ends the tools' database sessions
        server.__exit__(None, None, None)


class Mcp:
    """Raw JSON-RPC over Streamable HTTP (stateless, JSON responses): the whole answer as text."""

    def __init__(self, url: str, token: str):
        self.http = httpx.Client(
            timeout=30,
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                "MCP-Protocol-Version": "2025-06-18",
            },
        )
        self.url = url
        self.next_id = 0

    def raw(self, method: str, params: dict | None = None) -> httpx.Response:
        self.next_id += 1
        return self.http.post(
            self.url, json={"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        )

    def initialize(self) -> tuple[dict, str]:
        response = self.raw(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "matrix", "version": "0"}},
        )
        assert response.status_code == 200, response.text
        return response.json()["result"], response.text

    def call(self, tool: str, **arguments) -> tuple[dict, str]:
        """(result, whole body); the result of a failed tool has isError and the message as text."""
        response = self.raw("tools/call", {"name": tool, "arguments": arguments})
        assert response.status_code == 200, response.text
        body = response.json()
        assert "result" in body, body
        return body["result"], response.text

    def read(self, uri: str) -> tuple[dict, str]:
        response = self.raw("resources/read", {"uri": uri})
        assert response.status_code == 200, response.text
        return response.json(), response.text


def _hit_uris(result: dict) -> list[str]:
    structured = result.get("structuredContent") or {}
    return [h["uri"] for h in structured.get("results", structured.get("documents", []))]


def _error_text(result: dict) -> str:
    assert result.get("isError"), result
    return result["content"][0]["text"]


MCP_OPS = {}


def mcp_op(fn):
    MCP_OPS[fn.__name__.removeprefix("mcp_")] = fn
    return fn


@mcp_op
def initialize_instructions(mcp, p, w):
    result, text = mcp.initialize()
    instructions = result["instructions"]
    assert "pmd://handbook/ (3 documents)" in instructions
    assert "The team handbook, for everyone" in instructions
    assert (f"pmd://{HIDDEN}/ (3 documents)" in instructions) is p.sees_hidden, instructions
    assert (f"HR only: {SECRET_WORD}" in instructions) is p.sees_hidden
    return text


@mcp_op
def tools_list(mcp, p, w):
    response = mcp.raw("tools/list")
    assert response.status_code == 200, response.text
    assert {t["name"] for t in response.json()["result"]["tools"]} >= {
        "pmd_search",
        "pmd_vector_search",
        "pmd_deep_search",
        "pmd_get",
        "pmd_multi_get",
        "pmd_status",
    }
    # Every tool says what it does; the ones that write are the note tools, in the write matrix below.
    tools = response.json()["result"]["tools"]
    for tool in tools:
        hints = tool["annotations"]
        assert {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} <= set(hints), tool["name"]
    assert {t["name"] for t in tools if not t["annotations"]["readOnlyHint"]} == set(NOTE_TOOLS)
    return response.text


@mcp_op
def search_hidden_words(mcp, p, w):
    result, text = mcp.call("pmd_search", query=HIDDEN_QUERY, limit=50)
    assert not result.get("isError"), result
    uris = _hit_uris(result)
    assert (f"pmd://{HIDDEN}/salaries.md" in uris) is p.sees_hidden, uris
    _visible_uris(uris, p)
    return text


@mcp_op
def mcp_search_shared_content(mcp, p, w):
    result, text = mcp.call("pmd_search", query=SHARED_QUERY, limit=50)
    expected = {f"pmd://handbook/{SHARED_PATH}"} | ({f"pmd://{HIDDEN}/{SHARED_PATH}"} if p.sees_hidden else set())
    assert set(_hit_uris(result)) == expected
    return text


@mcp_op
def vector_search(mcp, p, w):
    result, text = mcp.call("pmd_vector_search", query=HIDDEN_QUERY, limit=50)
    assert not result.get("isError"), result
    uris = _hit_uris(result)
    assert uris and uris[0].startswith(f"pmd://{HIDDEN}/") is p.sees_hidden, uris
    _visible_uris(uris, p)
    return text


@mcp_op
def deep_search(mcp, p, w):
    result, text = mcp.call("pmd_deep_search", query=HIDDEN_QUERY, rerank=False, limit=50)
    assert not result.get("isError"), result
    uris = _hit_uris(result)
    assert uris and uris[0].startswith(f"pmd://{HIDDEN}/") is p.sees_hidden, uris
    _visible_uris(uris, p)
    return text


@mcp_op
def deep_search_typed(mcp, p, w):
    result, text = mcp.call(
        "pmd_deep_search",
        query="pay",
        rerank=False,
        limit=50,
        searches=[{"type": "lex", "query": "salary bands"}, {"type": "vec", "query": "compensation panel"}],
    )
    assert not result.get("isError"), result
    uris = _hit_uris(result)
    assert (f"pmd://{HIDDEN}/salaries.md" in uris) is p.sees_hidden, uris
    _visible_uris(uris, p)
    return text


def _mcp_filter_op(tool: str, **extra):
    def op(mcp, p, w):
        hidden, _hidden_text = mcp.call(tool, query="salary", collections=[HIDDEN], **extra)
        if p.sees_hidden:
            assert not hidden.get("isError") and _hit_uris(hidden)
            return
        never, _ = mcp.call(tool, query="salary", collections=[NEVER], **extra)
        same_as_never(_error_text(hidden), _error_text(never), tool)
        assert "no collection named" in _error_text(hidden) and "Did you mean" not in _error_text(hidden)

    op.__name__ = f"{tool}_collection_filter"
    return op


mcp_op(_mcp_filter_op("pmd_search"))
mcp_op(_mcp_filter_op("pmd_vector_search"))
mcp_op(_mcp_filter_op("pmd_deep_search", rerank=False))


def _mcp_get_op(name: str, hidden_ref, never_ref):
    def op(mcp, p, w):
        hidden, hidden_text = mcp.call("pmd_get", ref=hidden_ref(w))
        if p.sees_hidden:
            assert not hidden.get("isError") and hidden["structuredContent"]["uri"].startswith(f"pmd://{HIDDEN}/")
            return
        never, _ = mcp.call("pmd_get", ref=never_ref(w))
        hidden_message = _error_text(hidden).replace(hidden_ref(w), "REF")
        never_message = _error_text(never).replace(never_ref(w), "REF")
        same_as_never(hidden_message, never_message, name)
        assert SECRET_WORD not in hidden_text

    op.__name__ = f"get_{name}"
    return op


mcp_op(_mcp_get_op("by_uri", lambda w: f"pmd://{HIDDEN}/salaries.md", lambda w: f"pmd://{NEVER}/salaries.md"))
mcp_op(_mcp_get_op("by_collection_path", lambda w: f"{HIDDEN}/salaries.md", lambda w: f"{NEVER}/salaries.md"))
mcp_op(_mcp_get_op("by_docid", lambda w: f"#{w.docids['salaries']}", lambda w: NEVER_DOCID))


@mcp_op
def mcp_get_shared_content_by_docid(mcp, p, w):
    result, text = mcp.call("pmd_get", ref=f"#{w.docids['shared']}")
    assert not result.get("isError"), result
    if not p.sees_hidden:
        assert result["structuredContent"]["uri"] == f"pmd://handbook/{SHARED_PATH}"
        assert result["structuredContent"]["context"] == ["Company knowledge base", "The team handbook, for everyone"]
    return text


@mcp_op
def connector_search_hidden_words(mcp, p, w):
    """ChatGPT's `search`: the same service, the same caller, the same collections."""
    result, text = mcp.call("search", query=HIDDEN_QUERY)
    assert not result.get("isError"), result
    urls = [r["url"] for r in result["structuredContent"]["results"]]
    assert urls and any(f"/doc/{HIDDEN}/" in url for url in urls) is p.sees_hidden, urls
    return text


@mcp_op
def connector_fetch_hidden_by_id(mcp, p, w):
    """ChatGPT's `fetch` of a hidden note's id: as for an id that never existed."""
    hidden, hidden_text = mcp.call("fetch", id=w.docids["salaries"])
    if p.sees_hidden:
        assert not hidden.get("isError") and hidden["structuredContent"]["metadata"]["collection"] == HIDDEN
        return
    never_id = NEVER_DOCID.lstrip("#")
    never, _ = mcp.call("fetch", id=never_id)
    same_as_never(
        _error_text(hidden).replace(w.docids["salaries"], "REF"), _error_text(never).replace(never_id, "REF"), "fetch"
    )
    assert SECRET_WORD not in hidden_text


@mcp_op
def multi_get_glob(mcp, p, w):
    result, text = mcp.call("pmd_multi_get", pattern="**")
    assert not result.get("isError"), result
    assert len(_hit_uris(result)) == (6 if p.sees_hidden else 3)
    _visible_uris(_hit_uris(result), p)
    return text


@mcp_op
def multi_get_list(mcp, p, w):
    refs = [f"pmd://{HIDDEN}/salaries.md", f"#{w.docids['salaries']}", f"#{w.docids['shared']}"]
    result, _text = mcp.call("pmd_multi_get", pattern=",".join(refs))
    uris = _hit_uris(result)
    if p.sees_hidden:
        assert f"pmd://{HIDDEN}/salaries.md" in uris
        return None
    assert uris == [f"pmd://handbook/{SHARED_PATH}"]
    assert result["structuredContent"]["missing"] == refs[:2]
    return json.dumps({k: v for k, v in result["structuredContent"].items() if k != "missing"})


@mcp_op
def resources_list(mcp, p, w):
    """Documents are listed one by one (resources/list) to whoever sees them, and only to them: no leak."""
    texts = []
    for method in ("resources/list", "resources/templates/list", "prompts/list"):
        response = mcp.raw(method)
        assert response.status_code == 200 and "result" in response.json(), response.text
        texts.append(response.text)
    templates = json.loads(texts[1])["result"]["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["pmd://{collection}/{+path}{?start,lines}"], templates
    return " ".join(texts)


@mcp_op
def status(mcp, p, w):
    result, text = mcp.call("pmd_status")
    assert not result.get("isError"), result
    structured = result["structuredContent"]
    assert structured["documents"] == (6 if p.sees_hidden else 3)
    assert [c["name"] for c in structured["collections"]] == (["handbook", HIDDEN] if p.sees_hidden else ["handbook"])
    assert structured["problems"] == (1 if p.sees_hidden else 0)
    return text


@mcp_op
def resource_read(mcp, p, w):
    visible, _ = mcp.read("pmd://handbook/welcome.md")
    assert visible["result"]["contents"][0]["text"] == HANDBOOK_FILES["welcome.md"]
    hidden, _hidden_text = mcp.read(f"pmd://{HIDDEN}/salaries.md")
    if p.sees_hidden:
        assert hidden["result"]["contents"][0]["text"] == HIDDEN_FILES["salaries.md"]
        return
    never, _never_text = mcp.read(f"pmd://{NEVER}/salaries.md")
    assert "error" in hidden and "result" not in hidden, hidden
    hidden["id"] = never["id"]
    same_as_never(json.dumps(hidden), json.dumps(never), "resources/read")


@mcp_op
def resource_read_shared_copy(mcp, p, w):
    hidden, text = mcp.read(f"pmd://{HIDDEN}/{SHARED_PATH}")
    assert ("result" in hidden) is p.sees_hidden, hidden
    return None if p.sees_hidden else text.replace(HIDDEN, NEVER)


@pytest.mark.parametrize("op", list(MCP_OPS))
@pytest.mark.parametrize("who", TOKEN_PRINCIPALS)
def test_mcp_read(world, mcp_url, who, op):
    """Every MCP tool, resource and the instructions, acting with the token's scope."""
    p = PRINCIPALS[who]
    text = MCP_OPS[op](Mcp(mcp_url, world.tokens[who]), p, world)
    if text is not None and not p.sees_hidden:
        assert_no_leak(text, f"{who} {op}")


def test_mcp_instructions_follow_each_callers_access_in_turn(world, mcp_url):
    """The instructions are cached per set of visible collections: callers taking turns never get another's."""
    for who in ["insider", "outsider", "root", "insider_limited", "insider", "root_limited", "root"]:
        result, _ = Mcp(mcp_url, world.tokens[who]).initialize()
        assert (f"pmd://{HIDDEN}/" in result["instructions"]) is PRINCIPALS[who].sees_hidden, who


def test_mcp_refuses_expired_and_unknown_tokens(world, mcp_url):
    for raw in (world.expired, "pmd_" + "y" * 40):
        response = Mcp(mcp_url, raw).raw("tools/call", {"name": "pmd_search", "arguments": {"query": SECRET_WORD}})
        assert response.status_code == 401 and response.json()["code"] == "unauthorized"
        assert "resource_metadata=" in response.headers["www-authenticate"]  # OAuth's challenge (PMD_OAUTH)
        assert_no_leak(response.text)


# --- the CLI: the local user sees everything --------------------------------------------------


def test_cli_is_the_local_user_and_sees_everything(world, run_cli):
    code, out, err = run_cli("search", SECRET_WORD, "--json")
    assert code == 0, err
    assert f"pmd://{HIDDEN}/salaries.md" in {r["uri"] for r in json.loads(out)["results"]}
    code, out, err = run_cli("get", f"#{world.docids['salaries']}")
    assert code == 0 and SECRET_WORD in out, err
    code, out, err = run_cli("multi-get", "**/faq.md", "--json")
    assert code == 0, err
    assert len(json.loads(out)["documents"]) == 2
    code, out, err = run_cli("collection", "list")
    assert code == 0 and HIDDEN in out and "handbook" in out, err
    code, out, err = run_cli("status", "--json")
    assert code == 0, err
    assert json.loads(out)["index"]["documents"] == 6


def test_token_limited_to_removed_collections_does_not_widen(world):
    """A token sees what it is limited to; limited to nothing it would see all its user sees. Removing
    the last of its collections therefore revokes it (recorded), and removing one of two narrows it."""
    from indexing.models import AuditEvent, Collection
    from indexing.services.collections import collection_remove
    from indexing.services.tokens import token_create

    only_hidden = token_create(user="insider", name="hr-bot", access=Access.local_user(), collections=[HIDDEN])
    both = token_create(user="insider", access=Access.local_user(), collections=["handbook", HIDDEN]).raw
    client = Client(HTTP_AUTHORIZATION=f"Bearer {only_hidden.raw}")
    assert [c["name"] for c in client.get("/api/collections").json()["items"]] == [HIDDEN]
    collection_remove(name=HIDDEN, access=Access.local_user())
    for response in (
        client.get("/api/collections"),
        client.get("/api/search", {"q": SHARED_QUERY}),
        client.get("/api/get", {"ref": "pmd://handbook/welcome.md"}),
    ):
        assert response.status_code == 401, response.content
    event = AuditEvent.objects.filter(action="token.revoke").get()
    assert event.target.startswith(only_hidden.token.prefix) and event.detail["name"] == "hr-bot"
    narrowed = Client(HTTP_AUTHORIZATION=f"Bearer {both}")
    assert [c["name"] for c in narrowed.get("/api/collections").json()["items"]] == ["handbook"]

    # Removing all of a token's collections at once (a bulk delete) revokes it too.
    Collection.objects.filter(name="handbook").delete()
    assert narrowed.get("/api/collections").status_code == 401


def test_token_limited_to_collections_removed_together_is_revoked(world):
    from indexing.models import Collection
    from indexing.services.tokens import token_create

    both = token_create(user="insider", access=Access.local_user(), collections=["handbook", HIDDEN]).raw
    unlimited = token_create(user="insider", access=Access.local_user()).raw
    Collection.objects.filter(name__in=["handbook", HIDDEN]).delete()
    assert Client(HTTP_AUTHORIZATION=f"Bearer {both}").get("/api/collections").status_code == 401
    still = Client(HTTP_AUTHORIZATION=f"Bearer {unlimited}").get("/api/collections")
    assert still.status_code == 200 and still.json()["items"] == []


# --- notes: the write tools and /api/notes -----------------------------------------------------

NOTE_TOOLS = ["pmd_write_note", "pmd_edit_note", "pmd_move_note", "pmd_delete_note", "pmd_restore_note"]


def _note_writes(name: str) -> dict:
    """Each note write, aimed at collection `name`: (API method, URL, body) and (MCP tool, arguments)."""
    target = {"collection": name, "path": "welcome.md"}
    return {
        "write": ("/api/notes", "pmd_write_note", {"collection": name, "path": "new.md", "content": "# New\n"}),
        "replace": (
            "/api/notes",
            "pmd_write_note",
            {**target, "content": "# Gone\n", "replace": True, "base_hash": "abcdef"},
        ),
        "edit": (
            "/api/notes/edit",
            "pmd_edit_note",
            {"note": f"pmd://{name}/welcome.md", "base_hash": "abcdef", "operation": "append", "content": "x"},
        ),
        "move": ("/api/notes/move", "pmd_move_note", {**target, "new_path": "moved.md"}),
        "delete": ("/api/notes/delete", "pmd_delete_note", target),
        "restore": ("/api/notes/restore", "pmd_restore_note", {"collection": name, "trash_path": ".trash/welcome.md"}),
    }


NOTE_WRITES = list(_note_writes("x"))
# Tokens refused whatever they name: read-only ones (the read matrix's and a writer's).
NOTE_READ_ONLY = [*READ_ONLY_TOKENS, "writer_read"]


def _unchanged_on_disk(world) -> None:
    assert sorted(p.relative_to(world.root).as_posix() for p in world.root.rglob("*") if p.is_file()) == sorted(
        [f"src-a/{p}" for p in [*HANDBOOK_FILES, SHARED_PATH]] + [f"src-b/{p}" for p in [*HIDDEN_FILES, SHARED_PATH]]
    )


def _token_client(world, who: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {world.tokens[who]}")


def _api_note(world, who: str, write: str, name: str):
    url, _, body = _note_writes(name)[write]
    return _token_client(world, who).post(url, body, content_type="application/json")


@pytest.mark.parametrize("write", NOTE_WRITES)
@pytest.mark.parametrize("who", NOTE_READ_ONLY)
def test_api_read_only_token_cannot_write_notes(world, who, write):
    """403, the same answer whichever collection it names (one it sees, one it does not, none)."""
    answers = {_api_note(world, who, write, n).content.decode() for n in ("handbook", HIDDEN, NEVER)}
    assert len(answers) == 1, answers
    [answer] = answers
    assert json.loads(answer)["code"] == "forbidden" and "read-only" in json.loads(answer)["message"]
    assert_no_leak(answer)
    _unchanged_on_disk(world)


@pytest.mark.parametrize("write", NOTE_WRITES)
@pytest.mark.parametrize("who", ["outsider_write", "writer_write", "root_write_limited"])
def test_api_write_token_that_does_not_see_a_collection_finds_no_collection_there(world, who, write):
    """A member without access (a writer of it too), a token limited to another collection: the
    answer of a collection never created."""
    hidden, never = _api_note(world, who, write, HIDDEN), _api_note(world, who, write, NEVER)
    assert hidden.status_code == never.status_code == 404 and _body(hidden)["code"] == "collection_not_found"
    same_as_never(hidden.content.decode(), never.content.decode(), f"{who} {write}")
    _unchanged_on_disk(world)


@pytest.mark.parametrize("write", NOTE_WRITES)
@pytest.mark.parametrize(("who", "name"), [("insider_write", HIDDEN), ("outsider_write", "handbook")])
def test_api_member_who_may_only_read_a_collection_cannot_write_in_it(world, who, name, write):
    response = _api_note(world, who, write, name)
    assert response.status_code == 403 and "not write" in _body(response)["message"], response.content
    _unchanged_on_disk(world)


def test_api_a_collection_that_is_not_writable_refuses_everyone(world):
    from indexing.models import Collection

    Collection.objects.filter(name="handbook").update(writable=False)
    for who in ("writer_write", "root_write"):
        response = _api_note(world, who, "write", "handbook")
        assert response.status_code == 403 and "read-only" in _body(response)["message"], response.content
    _unchanged_on_disk(world)


def test_api_a_writer_writes_in_a_collection_it_sees_and_undoes_it(world):
    client = _token_client(world, "writer_write")
    created = client.post(
        "/api/notes",
        {"collection": "handbook", "path": "new.md", "content": "# Fresh\n"},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    assert _body(created)["indexed"] is True
    found = client.get("/api/search", {"q": "fresh"})
    assert [r["uri"] for r in _body(found)["results"]] == ["pmd://handbook/new.md"]
    deleted = client.post(
        "/api/notes/delete", {"collection": "handbook", "path": "new.md"}, content_type="application/json"
    )
    assert deleted.status_code == 200 and _body(deleted)["trash_path"] == ".trash/new.md"
    (world.root / "src-a/.trash/new.md").unlink()
    _unchanged_on_disk(world)


def _mcp_note(mcp_url, world, who: str, write: str, name: str) -> tuple[dict, str]:
    _, tool, arguments = _note_writes(name)[write]
    return Mcp(mcp_url, world.tokens[who]).call(tool, **arguments)


@pytest.mark.parametrize("write", NOTE_WRITES)
def test_mcp_write_tools_follow_the_same_rules(world, mcp_url, write):
    """Every write tool: read-only tokens refused alike everywhere; a collection one does not see is
    one never created; read-only sharing is refused; nothing changes on disk."""
    for who in ("insider", "root", "insider_limited", "writer_read"):
        texts = {_error_text(_mcp_note(mcp_url, world, who, write, n)[0]) for n in ("handbook", HIDDEN, NEVER)}
        assert len(texts) == 1 and "read-only" in next(iter(texts)), (who, texts)
    for who in ("outsider_write", "writer_write", "root_write_limited"):
        hidden, hidden_text = _mcp_note(mcp_url, world, who, write, HIDDEN)
        never, never_text = _mcp_note(mcp_url, world, who, write, NEVER)
        assert "no collection named" in _error_text(hidden), hidden
        same_as_never(hidden_text.replace('"id":1', '"id":N'), never_text.replace('"id":1', '"id":N'), who)
    for who, name in (("insider_write", HIDDEN), ("outsider_write", "handbook")):
        assert "not write" in _error_text(_mcp_note(mcp_url, world, who, write, name)[0])
    _unchanged_on_disk(world)


def test_mcp_a_writer_writes_and_the_note_is_found_at_once(world, mcp_url):
    mcp = Mcp(mcp_url, world.tokens["writer_write"])
    result, _ = mcp.call("pmd_write_note", collection="handbook", path="minutes.md", content="# Minutes\n\nwombats\n")
    assert not result.get("isError"), result
    written = result["structuredContent"]
    assert written["indexed"] and written["uri"] == "pmd://handbook/minutes.md"
    found, _ = mcp.call("pmd_search", query="wombats")
    assert _hit_uris(found) == ["pmd://handbook/minutes.md"]
    stale, _ = mcp.call(
        "pmd_edit_note", note="pmd://handbook/minutes.md", base_hash="000000", operation="append", content="x"
    )
    assert "changed since it was read" in _error_text(stale) and written["new_hash"] in _error_text(stale)
    activity, _ = mcp.call("pmd_recent_activity", since="1h")
    assert [(c["uri"], c["via"], c["action"]) for c in activity["structuredContent"]["changes"]][:1] == [
        ("pmd://handbook/minutes.md", "pmd", "created")
    ]
    outsider, text = Mcp(mcp_url, world.tokens["outsider"]).call("pmd_recent_activity", since="1h")
    assert_no_leak(text)
    deleted, _ = mcp.call("pmd_delete_note", collection="handbook", path="minutes.md")
    assert deleted["structuredContent"]["trash_path"] == ".trash/minutes.md"
    (world.root / "src-a/.trash/minutes.md").unlink()
    _unchanged_on_disk(world)


@pytest.mark.parametrize(
    "path", ["../escape.md", "/etc/passwd", "..%2fescape.md", ".git/config", ".obsidian/workspace.md", "run.sh"]
)
def test_mcp_a_hostile_writer_stays_inside_the_collection(world, mcp_url, path):
    """A writer's token, in a collection it may write in: every way out is a tool error and nothing is written."""
    mcp = Mcp(mcp_url, world.tokens["writer_write"])
    result, _ = mcp.call("pmd_write_note", collection="handbook", path=path, content="# pwned\n")
    assert (
        "not written there" in _error_text(result)
        or "not a note" in _error_text(result)
        or ("not a path inside" in _error_text(result))
    ), result
    moved, _ = mcp.call("pmd_move_note", collection="handbook", path="welcome.md", new_path=path)
    assert moved.get("isError"), moved
    _unchanged_on_disk(world)
