"""Server internals are for staff: members see health and counts, and only the jobs they started.

Internals are where things run: PMD_HOME, socket folders, the database host, the broker URL,
worker names. The CLI is the local OS user and gets the whole report.
"""

from __future__ import annotations

import json
import uuid

import anyio
import pytest
from django.conf import settings as django_settings
from django.test import Client

from indexing.access import Access
from indexing.models import Job
from indexing.services.jobs import job_create
from indexing.services.tokens import token_create
from tests.support.factories import api_client, make_user
from tests.support.mcp_client import SERVED_DB
from tests.support.mcp_client import http_client as _http_client


def _internal_strings() -> list[str]:
    """Text that names where this server runs: none of it may reach a member."""
    from pmd_site.watcher import broker_url

    strings = [str(django_settings.PMD_HOME)]
    host = django_settings.DATABASES["default"]["HOST"]
    if host:
        strings.append(str(host))
    url = broker_url()
    if url:
        strings.append(url.split("@")[-1])
    return strings


def _leaks(text: str) -> list[str]:
    return [s for s in _internal_strings() if s in text]


@pytest.fixture
def other(db):
    return make_user("other")


def _api(user) -> Client:
    return api_client(user)


def _browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def broker_configured(settings):
    """A real broker setting (the embedded Redis under PMD_HOME, not running): its URL is an internal."""
    settings.CELERY_TASK_ALWAYS_EAGER = False


# --- status --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_api_status_shows_internals_to_staff_and_cli_only(
    member, staff, indexed_collection, broker_configured, run_cli
):
    assert _internal_strings(), "the test server should have a PMD_HOME and a database socket folder"
    mine = _api(member).get("/api/status")
    assert mine.status_code == 200
    report = mine.json()
    assert _leaks(mine.content.decode()) == []
    assert {"pmd_home", "host", "name"}.isdisjoint(report["database"])
    assert "url" not in report["broker"] and "names" not in report["workers"]
    assert all("path" not in row for row in report["index"]["by_collection"])
    # Members still see health and counts.
    assert report["database"]["ok"] is True and report["database"]["pgvector"]
    assert report["index"]["documents"] == indexed_collection.documents.filter(active=True).count()
    assert report["index"]["by_collection"][0]["name"] == "notes"

    boss = _api(staff).get("/api/status").json()
    assert boss["database"]["pmd_home"] == str(django_settings.PMD_HOME)
    assert boss["index"]["by_collection"][0]["path"] == indexed_collection.root_path
    assert "url" in boss["broker"]

    code, out, _ = run_cli("status", "--json")
    assert code == 0 and json.loads(out)["database"]["pmd_home"] == str(django_settings.PMD_HOME)


@pytest.mark.django_db
def test_member_sees_a_failing_part_as_failing_without_its_error_text(member, staff, db, broker_configured):
    member_broker = _api(member).get("/api/status", {"section": "broker"}).json()["broker"]
    staff_broker = _api(staff).get("/api/status", {"section": "broker"}).json()["broker"]
    assert staff_broker["ok"] is False and "not reachable" in staff_broker["error"]
    assert member_broker["ok"] is False and "staff" in member_broker["error"]
    assert _leaks(json.dumps(member_broker)) == []


@pytest.mark.django_db
def test_web_status_page_hides_internals_from_members(member, staff, indexed_collection, broker_configured):
    page = _browser(member).get("/status/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Database" in html and "pgvector" in html
    assert _leaks(html) == []
    assert str(django_settings.PMD_HOME) in _browser(staff).get("/status/").content.decode()


# --- jobs ----------------------------------------------------------------------------------------


@pytest.fixture
def jobs(member, other, indexed_collection):
    """A job the member started, one another member started, and one of the CLI (no owner)."""
    return {
        "own": job_create(kind=Job.Kind.INDEX, collection=indexed_collection, created_by=member),
        "other": job_create(kind=Job.Kind.INDEX, collection=indexed_collection, created_by=other),
        "cli": job_create(
            kind=Job.Kind.UPDATE, collection=indexed_collection, message=f"scanning {indexed_collection.root_path}"
        ),
    }


@pytest.mark.django_db
def test_api_jobs_members_see_their_own_and_404_for_the_rest(member, staff, jobs):
    api = _api(member)
    assert api.get(f"/api/jobs/{jobs['own'].pk}").status_code == 200
    nonexistent = api.get(f"/api/jobs/{uuid.uuid4()}")
    for name in ("other", "cli"):
        response = api.get(f"/api/jobs/{jobs[name].pk}")
        assert response.status_code == 404, name
        assert response.json()["message"] == f"no job {jobs[name].pk}"  # the same answer as a job that never was
    assert nonexistent.status_code == 404
    listed = api.get("/api/jobs").json()
    assert [j["id"] for j in listed["items"]] == [str(jobs["own"].pk)]

    boss = _api(staff)
    assert all(boss.get(f"/api/jobs/{job.pk}").status_code == 200 for job in jobs.values())
    assert {j["id"] for j in boss.get("/api/jobs").json()["items"]} == {str(j.pk) for j in jobs.values()}


@pytest.mark.django_db
def test_api_records_who_started_a_job(staff, indexed_collection, eager_tasks):
    started = _api(staff).post("/api/collections/notes/reindex")
    assert started.status_code == 202
    assert Job.objects.get(pk=started.json()["id"]).created_by == staff


@pytest.mark.django_db
def test_web_job_page_members_see_their_own_and_404_for_the_rest(member, staff, jobs):
    browser = _browser(member)
    assert browser.get(f"/jobs/{jobs['own'].pk}/").status_code == 200
    assert browser.get(f"/jobs/{jobs['other'].pk}/").status_code == 404
    assert browser.get(f"/jobs/{jobs['cli'].pk}/").status_code == 404
    assert browser.get(f"/jobs/{uuid.uuid4()}/").status_code == 404
    boss = _browser(staff)
    assert all(boss.get(f"/jobs/{job.pk}/").status_code == 200 for job in jobs.values())


@pytest.mark.django_db
def test_web_collections_page_shows_members_only_their_jobs(member, staff, jobs, indexed_collection):
    Job.objects.filter(pk=jobs["own"].pk).delete()  # the latest job of the collection is the CLI's
    html = _browser(member).get("/collections/").content.decode()
    assert indexed_collection.root_path not in html.split("job-slot", 1)[-1]
    assert f"job-{jobs['cli'].pk}" not in html and f"job-{jobs['other'].pk}" not in html
    assert f"job-{jobs['cli'].pk}" in _browser(staff).get("/collections/").content.decode()


@pytest.mark.django_db
def test_web_records_who_started_a_job(staff, indexed_collection, eager_tasks):
    response = _browser(staff).post("/collections/notes/reindex/")
    assert response.status_code == 302
    assert Job.objects.filter(collection=indexed_collection).first().created_by == staff


# --- MCP over HTTP -----------------------------------------------------------------------------


@SERVED_DB
def test_mcp_status_tool_internals_only_for_staff_tokens(asgi_server, indexed_collection):
    member_token = token_create(user=make_user("agent"), access=Access.local_user(), can_write=True).raw
    staff_token = token_create(user=make_user("ops", staff=True), access=Access.local_user(), can_write=True).raw

    async def status(token):
        async with _http_client(asgi_server, token) as client:
            return await client.call_tool("pmd_status", {})

    member = anyio.run(status, member_token)
    assert not member.is_error
    assert member.structured_content["server"] is None
    assert member.structured_content["documents"] == indexed_collection.documents.filter(active=True).count()
    assert _leaks(json.dumps(member.structured_content) + member.content[0].text) == []

    staff = anyio.run(status, staff_token)
    assert staff.structured_content["server"]["database"]["pmd_home"] == str(django_settings.PMD_HOME)
    assert (
        "url" in staff.structured_content["server"]["broker"] or "mode" in staff.structured_content["server"]["broker"]
    )


# --- collection folders --------------------------------------------------------------------------


@pytest.mark.django_db
def test_collection_folders_are_shown_to_staff_only(member, staff, indexed_collection):
    folder = indexed_collection.root_path
    client = _api(member)
    listed = client.get("/api/collections").json()
    assert listed["items"][0]["name"] == "notes" and listed["items"][0]["path"] is None
    detail = client.get("/api/collections/notes").json()
    assert detail["path"] is None and detail["documents"] > 0
    assert folder not in _browser(member).get("/collections/").content.decode()
    assert _api(staff).get("/api/collections/notes").json()["path"] == folder
    assert folder in _browser(staff).get("/collections/").content.decode()


@pytest.mark.django_db
def test_members_see_problems_without_server_paths(member, staff):
    """A refused collection's problem names PMD_HOME and the folder: staff see it, members see it redacted."""
    import shutil

    from indexing.models import Collection
    from indexing.services.scanning import collection_index

    folder = django_settings.PMD_HOME / "notes-by-mistake"
    folder.mkdir()
    try:
        (folder / "a.md").write_text("# A\n")
        collection_index(Collection.objects.create(name="home", root_path=str(folder)))
    finally:
        shutil.rmtree(folder)
    member_recent = _api(member).get("/api/status", {"section": "problems"}).json()["problems"]["recent"]
    assert member_recent and member_recent[0]["severity"] == "error"
    assert _leaks(json.dumps(member_recent)) == [] and str(folder) not in json.dumps(member_recent)
    staff_recent = _api(staff).get("/api/status", {"section": "problems"}).json()["problems"]["recent"]
    assert str(folder) in json.dumps(staff_recent)


@pytest.mark.django_db
def test_members_see_unresolved_link_messages_as_written(member, tmp_path):
    """A note's link to /docs/x.md is the note's text, not a server folder: not redacted."""
    from indexing.models import Collection
    from indexing.services.scanning import collection_index

    (tmp_path / "a.md").write_text("# A\n\nSee [the API](/docs/api.md) and [[Gone Note]].\n")
    collection_index(Collection.objects.create(name="links", root_path=str(tmp_path)))
    messages = [
        p["message"] for p in _api(member).get("/api/status", {"section": "problems"}).json()["problems"]["recent"]
    ]
    assert "unresolved link (/docs/api.md) on line 3" in messages
    assert "unresolved link [[Gone Note]] on line 3" in messages
    assert not [m for m in messages if "folder on the server" in m]


def test_member_redaction_replaces_whole_server_paths_only():
    from pmd_site.reports.status import _redact_paths

    assert _redact_paths("cannot read /srv/notes/a.md: permission denied") == (
        "cannot read (a folder on the server): permission denied"
    )
    assert _redact_paths("refused (/srv/notes) twice") == "refused (a folder on the server) twice"  # no ((…))
    assert _redact_paths("/srv/x is inside pmd's own data folder (PMD_HOME=/var/lib/pmd): not a collection") == (
        "(a folder on the server) is inside pmd's own data folder (PMD_HOME=(a folder on the server)): not a collection"
    )
    for kept in ("see foo-bar/baz.md and @types/node", "pmd://notes/a/b.md is gone", "1/2 done"):
        assert _redact_paths(kept) == kept


@pytest.mark.django_db
def test_members_see_the_local_models_name_but_not_its_folder(member, staff, settings, tmp_path, run_cli):
    """PMD_EMBED_MODEL may be a folder on the server (the local backend): members see its name only."""
    from indexing.models import EmbeddingFingerprint

    folder = tmp_path / "private-models" / "mini-embedder"
    folder.mkdir(parents=True)
    old = tmp_path / "private-models" / "old-embedder"
    settings.PMD_LLM_BACKEND = "local"
    settings.PMD_EMBED_MODEL = str(folder)
    EmbeddingFingerprint.objects.create(key="old", model=str(old), dims=3, backend="local")  # another model's vectors

    mine = _api(member).get("/api/status", {"section": "embeddings"})
    seen = mine.content.decode()
    assert mine.status_code == 200 and str(tmp_path) not in seen and "private-models" not in seen
    embeddings = mine.json()["embeddings"]
    assert embeddings["model"] == "mini-embedder (a folder on the server)"
    assert "mini-embedder (a folder on the server)" in embeddings["hint"]  # another model's vectors are there
    assert str(tmp_path) not in _browser(member).get("/status/").content.decode()

    assert _api(staff).get("/api/status", {"section": "embeddings"}).json()["embeddings"]["model"] == str(folder)
    code, out, _ = run_cli("status", "--json")
    assert code == 0 and json.loads(out)["embeddings"]["model"] == str(folder)
