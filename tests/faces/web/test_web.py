"""The browser UI through Django's test client: auth, pages, htmx fragments, safety."""

from __future__ import annotations

import io
import re
import time

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from indexing.access import Access
from indexing.models import Collection, Document, Job
from tests.support.factories import make_user

pytestmark = pytest.mark.django_db

PAGES = ["/", "/collections/", "/status/", "/doc/notes/README.md", "/raw/notes/README.md"]
HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "results"}


def _wait_for_job(job_id, timeout: float = 30.0) -> Job:
    deadline = time.monotonic() + timeout
    while True:
        job = Job.objects.get(pk=job_id)
        if job.finished or time.monotonic() > deadline:
            return job
        time.sleep(0.1)


# --- auth -------------------------------------------------------------------------------


@pytest.mark.parametrize("url", PAGES + ["/jobs/00000000-0000-0000-0000-000000000000/", "/d/abcdef"])
def test_every_page_requires_login(client, indexed_collection, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


def test_login_page_logs_in_and_logout_needs_post(member):
    client = Client(enforce_csrf_checks=True)
    page = client.get("/accounts/login/?next=/status/")
    assert page.status_code == 200 and b'name="csrfmiddlewaretoken"' in page.content
    token = page.cookies["csrftoken"].value
    bad = client.post("/accounts/login/", {"username": "member", "password": "wrong", "csrfmiddlewaretoken": token})
    assert b"didn&#x27;t match" in bad.content or b"didn't match" in bad.content
    ok = client.post(
        "/accounts/login/",
        {"username": "member", "password": "correct horse battery", "next": "/status/", "csrfmiddlewaretoken": token},
    )
    assert ok.status_code == 302 and ok["Location"] == "/status/"
    assert client.get("/status/").status_code == 200
    assert client.get("/accounts/logout/").status_code == 405  # logging out is a POST with a token
    client.post("/accounts/logout/", {"csrfmiddlewaretoken": client.cookies["csrftoken"].value})
    assert client.get("/status/").status_code == 302


def test_forms_without_csrf_token_are_rejected(staff, corpus_dir):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff)
    response = client.post("/collections/add/", {"path": str(corpus_dir), "name": "sneaky"})
    assert response.status_code == 403
    assert not Collection.objects.filter(name="sneaky").exists()
    page = client.get("/collections/")
    assert page.content.count(b'name="csrfmiddlewaretoken"') >= 1


# --- search -------------------------------------------------------------------------------


def test_search_page_full_and_htmx_fragment(member_client, indexed_collection):
    full = member_client.get("/")
    assert full.status_code == 200
    html = full.content.decode()
    assert "<html" in html and 'id="q"' in html and 'hx-push-url="true"' in html and "hx-sync" in html
    assert "/static/pmd/htmx.min.js" in html  # served by us, never a CDN
    assert "notes" in html  # the collection filter
    assert "Content-Security-Policy" in full.headers
    fragment = member_client.get("/", {"q": "postgres", "mode": "keyword"}, **HTMX)
    assert fragment.status_code == 200
    assert "<html" not in fragment.content.decode()
    assert "HX-Request" in fragment.headers["Vary"]


def test_history_restore_gets_the_full_page(member_client, indexed_collection):
    response = member_client.get(
        "/", {"q": "postgres"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="results", HTTP_HX_HISTORY_RESTORE_REQUEST="true"
    )
    assert "<html" in response.content.decode()


def test_keyword_results_render_cards_with_highlighted_snippets(member_client, indexed_collection):
    response = member_client.get("/", {"q": "PostgreSQL", "mode": "keyword"}, **HTMX)
    html = response.content.decode()
    assert 'class="result"' in html
    assert "notes/guides/postgres-tuning.md:" in html
    assert "<mark>" in html
    doc = Document.objects.get(path="guides/postgres-tuning.md")
    assert f"#{doc.docid}" in html
    assert "/doc/notes/guides/postgres-tuning.md?line=" in html
    assert "Server-Timing" in response.headers


def test_no_matches_explains_what_to_try(member_client, indexed_collection):
    html = member_client.get("/", {"q": "zzzqqqxxyy", "mode": "keyword"}, **HTMX).content.decode()
    assert "No matches" in html and "mode=hybrid" in html


def test_unknown_collection_filter_is_a_clear_error(member_client, indexed_collection):
    html = member_client.get("/", {"q": "postgres", "collection": "nope"}, **HTMX).content.decode()
    assert "no collection named" in html


def test_hybrid_without_the_model_server_shows_keyword_results_and_says_so(
    member_client, indexed_collection, ollama_down, caplog
):
    html = member_client.get("/", {"q": "PostgreSQL", "mode": "hybrid"}, **HTMX).content.decode()
    assert 'class="notice warning"' in html and "keyword results only" in html
    assert 'class="result"' in html and "notes/guides/postgres-tuning.md:" in html
    assert not [r for r in caplog.records if r.exc_info], "an expected outage logs no traceback"


def test_empty_index_tells_staff_to_add_a_collection(staff_client):
    html = staff_client.get("/").content.decode()
    assert "Nothing indexed yet" in html and "Add a collection" in html


def test_pages_name_their_icon_and_status_colours_are_readable(staff_client):
    """A favicon 404 on every page; axe-core: `.ok` 3.96:1, `.warn` 3.3:1 (AA needs 4.5:1)."""
    import re

    from tests.support.paths import ROOT

    assert 'rel="icon"' in staff_client.get("/").content.decode()
    assert (ROOT / "pmd_site/web/static/pmd/favicon.svg").is_file()
    css = (ROOT / "pmd_site/web/static/pmd/pmd.css").read_text()
    light = dict(re.findall(r"--([a-z-]+): (#[0-9a-f]{6})", css.split("@media")[0]))

    def luminance(colour):
        channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    for fg in ("ok", "warn", "bad", "muted"):
        for bg in ("bg", "surface", "code-bg"):
            high, low = sorted([luminance(light[fg]), luminance(light[bg])], reverse=True)
            assert (high + 0.05) / (low + 0.05) >= 4.5, (fg, bg)


# --- documents -----------------------------------------------------------------------------


def test_document_view_renders_markdown_with_line_anchors_and_metadata(member_client, indexed_collection):
    doc = Document.objects.get(path="guides/postgres-tuning.md")
    response = member_client.get("/doc/notes/guides/postgres-tuning.md", {"line": 9, "q": "work_mem"})
    html = response.content.decode()
    assert response.status_code == 200
    assert "<h1" in html and "Tuning PostgreSQL for search" in html
    assert 'id="L7"' in html  # the first heading after 5 lines of frontmatter and a blank line
    assert 'data-line="9"' in html
    assert f"#{doc.docid}" in html and "pmd://notes/guides/postgres-tuning.md" in html
    assert "performance" in html  # frontmatter tags
    source = member_client.get("/doc/notes/guides/postgres-tuning.md", {"view": "source", "line": 9}).content.decode()
    assert 'id="L9" class="line hit"' in source
    raw = member_client.get("/raw/notes/guides/postgres-tuning.md")
    assert raw["Content-Type"].startswith("text/plain") and raw.content.decode() == doc.content.body


def test_document_contexts_are_shown(member_client, indexed_collection):
    from indexing.services.contexts import context_set

    context_set(target="pmd://notes/guides", text="How-to guides for the search stack", access=Access.local_user())
    html = member_client.get("/doc/notes/guides/postgres-tuning.md").content.decode()
    assert "How-to guides for the search stack" in html


def test_docid_link_redirects_to_the_document(member_client, indexed_collection):
    doc = Document.objects.get(path="README.md")
    response = member_client.get(f"/d/{doc.docid}")
    assert response.status_code == 302 and response["Location"] == "/doc/notes/README.md"


@pytest.mark.parametrize(
    "url",
    [
        "/doc/notes/../../../../etc/passwd",
        "/raw/notes/..%2f..%2f..%2fetc/passwd",
        "/doc/notes/%2Fetc%2Fpasswd",
        "/raw/notes/notes.txt",
        "/doc/notes/node_modules/pkg/readme.md",
        "/doc/other/README.md",
    ],
)
def test_no_page_reads_files_outside_the_index(member_client, indexed_collection, url):
    response = member_client.get(url)
    assert response.status_code == 404
    assert b"root:" not in response.content


def test_malicious_markdown_cannot_inject_script(member_client, tmp_path):
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    folder = tmp_path / "evil"
    folder.mkdir()
    (folder / "evil.md").write_text(
        "---\ntitle: <script>alert('title')</script>\nowner: <img src=x onerror=alert(9)>\n---\n"
        "# Hello <script>alert('h1')</script>\n\n"
        "<img src=x onerror=alert(1)> <svg onload=alert(2)></svg>\n\n"
        '[click](javascript:alert(3)) <a href="javascript:alert(4)">x</a> <a href="data:text/html,hi">d</a>\n\n'
        '<iframe src="https://example.com"></iframe><div onclick="alert(5)" style="position:fixed">y</div>\n\n'
        '<form id="search-form" action="https://evil.example"><input name=q></form>\n\n'
        "<script>document.cookie</script>\n\nevil payload words\n"
    )
    collection_index(collection_create(path=folder, name="evil"))
    for view in ("rendered", "source"):
        html = member_client.get("/doc/evil/evil.md", {"view": view}).content.decode()
        body = html.split("<main", 1)[1]
        assert "<script>" not in body and "<script " not in body
        assert not re.search(r"<[^>]+\son\w+\s*=", body), "event handler attribute survived"
        assert 'href="javascript:' not in body and 'href="data:' not in body
        assert "<iframe" not in body and '<form id="search-form"' not in body
        assert "evil.example" not in body or view == "source"
    results = member_client.get("/", {"q": "evil payload", "mode": "keyword"}, **HTMX).content.decode()
    assert "<script>" not in results and "&lt;script&gt;" in results or "evil.md" in results


# --- collections, jobs, staff ---------------------------------------------------------------


def test_members_see_collections_but_cannot_manage_them(member_client, indexed_collection, corpus_dir):
    page = member_client.get("/collections/").content.decode()
    assert "notes" in page and "Add a collection" not in page and "Reindex" not in page
    assert member_client.post("/collections/add/", {"path": str(corpus_dir), "name": "x"}).status_code == 403
    assert member_client.post("/collections/notes/reindex/").status_code == 403
    assert not Collection.objects.filter(name="x").exists()


def test_add_form_errors_are_shown(staff_client, tmp_path, settings):
    settings.PMD_COLLECTION_ROOTS = [tmp_path]  # the web UI adds collections only under these
    response = staff_client.post("/collections/add/", {"path": str(tmp_path / "missing"), "name": "gone"})
    assert response.status_code == 400
    assert "choose an existing folder" in response.content.decode()


def test_add_form_says_which_folders_may_be_added_and_who_changes_that(staff_client, member_client, tmp_path, settings):
    settings.PMD_COLLECTION_ROOTS = [tmp_path / "notes", tmp_path / "team"]
    page = staff_client.get("/collections/").content.decode()
    assert f"<code>{tmp_path / 'notes'}</code>, <code>{tmp_path / 'team'}</code>" in page
    assert "PMD_COLLECTION_ROOTS" in page and "pmd up" in page
    assert str(tmp_path) not in member_client.get("/collections/").content.decode()  # where pmd runs: staff only
    settings.PMD_COLLECTION_ROOTS = []
    assert "No folder may be added here yet" in staff_client.get("/collections/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_staff_adds_a_collection_and_follows_its_job_to_completion(staff_client, corpus_dir, settings):
    settings.PMD_COLLECTION_ROOTS = [corpus_dir.parent]
    response = staff_client.post("/collections/add/", {"path": str(corpus_dir), "name": "handbook", "mask": ""})
    assert response.status_code == 302
    collection = Collection.objects.get(name="handbook")
    job = Job.objects.get(collection=collection, kind=Job.Kind.INDEX)
    fragment = staff_client.get(f"/jobs/{job.pk}/").content.decode()
    job = _wait_for_job(job.pk)
    assert job.state == Job.State.DONE, job.message
    assert collection.documents.filter(active=True).count() == 6
    if "hx-trigger" in fragment:
        assert "load delay" in fragment  # a job still running polls for its progress
    done = staff_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "hx-trigger" not in done and 'value="100"' in done
    assert "with problems" in done and "latin1.md" in done  # per-file problems of the scan
    # Reindex through htmx returns the job fragment for the row.
    again = staff_client.post("/collections/handbook/reindex/", HTTP_HX_REQUEST="true")
    assert again.status_code == 200 and 'class="job' in again.content.decode()
    _wait_for_job(Job.objects.filter(collection=collection).first().pk)


def test_status_page_shows_each_section(member_client, indexed_collection):
    html = member_client.get("/status/").content.decode()
    assert "Database" in html and "Index" in html and "pgvector" in html


# --- admin and CLI ---------------------------------------------------------------------------


def test_admin_lists_documents_by_docid_with_read_only_body(indexed_collection):
    admin_user = make_user("root", password="correct horse battery", superuser=True)
    client = Client()
    client.force_login(admin_user)
    doc = Document.objects.get(path="README.md")
    listing = client.get("/admin/indexing/document/", {"q": f"#{doc.docid}"}).content.decode()
    assert "README.md" in listing and "postgres-tuning.md" not in listing
    change = client.get(f"/admin/indexing/document/{doc.pk}/change/").content.decode()
    assert "Project Handbook" in change and 'name="title"' not in change  # read-only
    for model in ("collection", "pathcontext", "job", "fileproblem"):
        assert client.get(f"/admin/indexing/{model}/").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_admin_reindex_action_starts_a_job(indexed_collection):
    admin_user = make_user("root", password="correct horse battery", superuser=True)
    client = Client()
    client.force_login(admin_user)
    response = client.post(
        "/admin/indexing/collection/", {"action": "reindex", "_selected_action": [indexed_collection.pk]}
    )
    assert response.status_code == 302
    job = Job.objects.get(collection=indexed_collection, kind=Job.Kind.INDEX)
    assert _wait_for_job(job.pk).state == Job.State.DONE


def test_admin_revoke_action_revokes_through_the_token_service(member):
    from indexing.services.tokens import token_authenticate, token_create

    admin_user = make_user("root", password="correct horse battery", superuser=True)
    client = Client()
    client.force_login(admin_user)
    tokens = [token_create(user=member, name=n, access=Access.local_user(), can_write=True) for n in ("one", "two")]
    kept = token_create(user=member, name="kept", access=Access.local_user(), can_write=True)
    response = client.post(
        "/admin/indexing/apitoken/",
        {"action": "revoke_selected", "_selected_action": [t.token.pk for t in tokens]},
        follow=True,
    )
    assert response.status_code == 200 and b"Revoked 2 token(s)" in response.content  # the admin capitalises
    assert [token_authenticate(t.raw) for t in tokens] == [None, None] and getattr(
        token_authenticate(kept.raw), "user", None
    ) == member


@pytest.mark.django_db(transaction=True)
def test_user_create_cli(run_cli, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("a long enough passphrase\n"))
    code, out, err = run_cli("user", "create", "alice", "--staff", "--password-stdin")
    assert code == 0, err
    user = get_user_model().objects.get(username="alice")
    assert user.is_staff and user.check_password("a long enough passphrase")
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
    code, _, err = run_cli("user", "create", "bob", "--password-stdin")
    assert code == 1 and "password rejected" in err
    monkeypatch.setattr("sys.stdin", io.StringIO("another good passphrase\n"))
    code, _, err = run_cli("user", "create", "alice", "--password-stdin")
    assert code == 1 and "already exists" in err


def test_semantic_without_embeddings_offers_to_run_embedding(staff_client, member_client, indexed_collection):
    staff_html = staff_client.get("/", {"q": "postgres", "mode": "semantic"}, **HTMX).content.decode()
    assert "No embeddings yet" in staff_html and 'action="/collections/embed/"' in staff_html
    member_html = member_client.get("/", {"q": "postgres", "mode": "semantic"}, **HTMX).content.decode()
    assert "No embeddings yet" in member_html and "pmd embed" in member_html
    assert member_client.post("/collections/embed/").status_code == 403


@pytest.mark.django_db(transaction=True)
def test_embed_button_and_admin_action_start_embedding_jobs(staff_client, indexed_collection, ollama):
    response = staff_client.post("/collections/notes/embed/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "Embed" in response.content.decode()
    job = Job.objects.get(kind=Job.Kind.EMBED)
    assert _wait_for_job(job.pk).state == Job.State.DONE
    page = staff_client.get("/collections/").content.decode()
    documents, embedded, stale = re.search(
        r'<td class="num">(\d+)</td>\s*<td class="num">(\d+)</td>\s*<td class="num">(\d+)</td>', page
    ).groups()
    assert (documents, stale) == ("6", "0") and int(embedded) > 0
    admin_user = make_user("root", password="correct horse battery", superuser=True)
    client = Client()
    client.force_login(admin_user)
    client.post("/admin/indexing/collection/", {"action": "embed", "_selected_action": [indexed_collection.pk]})
    second = Job.objects.filter(kind=Job.Kind.EMBED).exclude(pk=job.pk).get()
    assert _wait_for_job(second.pk).state == Job.State.DONE


# --- API tokens -------------------------------------------------------------------------------


def _create_token(client, name: str = "my script") -> str:
    response = client.post("/tokens/new/", {"name": name})
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    match = re.search(rb'id="new-token">(pmd_[A-Za-z0-9_-]+)<', response.content)
    assert match, "the new token is shown on the result page"
    return match.group(1).decode()


@pytest.mark.parametrize("method,url", [("get", "/tokens/"), ("post", "/tokens/new/"), ("post", "/tokens/1/revoke/")])
def test_token_pages_require_login(client, method, url):
    response = getattr(client, method)(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


def test_tokens_page_is_in_the_navigation(member_client):
    page = member_client.get("/status/").content.decode()
    assert 'href="/tokens/"' in page and "API tokens" in page
    tokens = member_client.get("/tokens/")
    assert tokens.status_code == 200
    assert b'href="/tokens/" aria-current="page"' in tokens.content
    assert b"No tokens yet" in tokens.content
    assert "script-src 'self'" in tokens["Content-Security-Policy"]


def test_created_token_is_shown_once_stored_as_digest_and_authenticates(member_client, member):
    from indexing.models import ApiToken
    from indexing.services.tokens import token_digest

    response = member_client.post("/tokens/new/", {"name": "laptop agent"})
    page = response.content.decode()
    raw = re.search(r'id="new-token">(pmd_[A-Za-z0-9_-]+)<', page).group(1)
    assert f"Authorization: Bearer {raw}" in page  # the curl example
    assert "http://testserver/mcp" in page and "http://testserver/api/status" in page
    assert 'data-copy="#new-token"' in page
    stored = ApiToken.objects.get(user=member)
    assert stored.name == "laptop agent" and stored.digest == token_digest(raw) and raw not in stored.digest
    assert not ApiToken.objects.filter(prefix=raw).exists() and raw.startswith(stored.prefix)

    again = member_client.get("/tokens/").content.decode()
    assert raw not in again and "laptop agent" in again and f"{stored.prefix}…" in again
    assert "never" in again  # not used yet

    assert Client(HTTP_AUTHORIZATION=f"Bearer {raw}").get("/api/status").status_code == 200
    assert "never" not in member_client.get("/tokens/").content.decode().split("<tbody>")[1]


def test_token_name_is_required(member_client):
    from indexing.models import ApiToken

    response = member_client.post("/tokens/new/", {"name": "  "})
    assert response.status_code == 400 and b'class="field-error"' in response.content
    assert b'id="new-token"' not in response.content and not ApiToken.objects.exists()


def test_revoked_token_no_longer_authenticates(member_client, member):
    from indexing.models import ApiToken

    raw = _create_token(member_client)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.get("/api/status").status_code == 200
    token = ApiToken.objects.get(user=member)
    assert member_client.get(f"/tokens/{token.pk}/revoke/").status_code == 405  # revoking is a POST
    response = member_client.post(f"/tokens/{token.pk}/revoke/", follow=True)
    assert response.status_code == 200 and b"Revoked token" in response.content
    assert b"revoked</span>" in response.content
    assert api.get("/api/status").status_code == 401


def test_users_see_and_revoke_only_their_own_tokens(member_client, staff_client, member, staff):
    from indexing.services.tokens import token_authenticate, token_create

    mine = token_create(user=staff, name="boss bot", access=Access.local_user(), can_write=True)
    _create_token(member_client, "member bot")
    assert b"boss bot" not in member_client.get("/tokens/").content
    staff_page = staff_client.get("/tokens/").content
    assert b"boss bot" in staff_page and b"member bot" not in staff_page  # staff too: own tokens only
    assert member_client.post(f"/tokens/{mine.token.pk}/revoke/").status_code == 404
    assert getattr(token_authenticate(mine.raw), "user", None) == staff
    member_token = member.api_tokens.get()
    assert staff_client.post(f"/tokens/{member_token.pk}/revoke/").status_code == 404
    member_token.refresh_from_db()
    assert member_token.revoked is None


def test_token_forms_need_a_csrf_token(member):
    from indexing.services.tokens import token_create

    client = Client(enforce_csrf_checks=True)
    client.force_login(member)
    created = token_create(user=member, name="kept", access=Access.local_user(), can_write=True)
    assert client.post("/tokens/new/", {"name": "sneaky"}).status_code == 403
    assert client.post(f"/tokens/{created.token.pk}/revoke/").status_code == 403
    assert list(member.api_tokens.values_list("name", "revoked")) == [("kept", None)]
    page = client.get("/tokens/")
    assert page.content.count(b'name="csrfmiddlewaretoken"') >= 3  # logout, revoke, create
    csrf = client.cookies["csrftoken"].value
    assert client.post("/tokens/new/", {"name": "ok", "csrfmiddlewaretoken": csrf}).status_code == 200


def test_a_service_error_in_a_page_is_its_problem_page_or_fragment_with_its_status(member_client, indexed_collection):
    page = member_client.get("/doc/notes/nowhere.md")
    assert page.status_code == 404
    assert "<h2>Not found</h2><p>no document pmd://notes/nowhere.md" in page.content.decode()
    fragment = member_client.get("/doc/notes/nowhere.md", HTTP_HX_REQUEST="true")
    assert fragment.status_code == 404 and "<html" not in fragment.content.decode()
    assert 'class="state problem not-found"' in fragment.content.decode()
    assert member_client.get("/d/zzzzzz").status_code == 404
