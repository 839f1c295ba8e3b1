"""Making a collection writable and choosing its writers, from every face that manages collections:
the CLI, the API and the admin, all through one service (audited)."""

from __future__ import annotations

import json

import pytest

from indexing.models import AuditEvent, Collection
from tests.support.factories import api_client, make_group, make_user, make_vault, web_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(tmp_path):
    return make_vault(tmp_path / "team", {"a.md": "# A\n"}, name="team")


def test_a_collection_is_read_only_until_made_writable(team):
    assert Collection.objects.get(name="team").writable is False


def test_cli_makes_a_collection_writable_and_chooses_its_writers(team, run_cli):
    make_user("ada")
    make_group("editors")
    code, out, err = run_cli(
        "collection", "set", "team", "--writable", "on", "--writer", "ada", "--writer-group", "editors", "--json"
    )
    assert code == 0, err
    row = json.loads(out)
    assert (row["writable"], row["writer_users"], row["writer_groups"]) == (True, ["ada"], ["editors"])
    code, out, _ = run_cli("collection", "set", "team", "--writable", "off", "--no-writers")
    assert code == 0 and "read-only" in out
    team.refresh_from_db()
    assert not team.writable and not team.writer_users.exists() and not team.writer_groups.exists()
    assert AuditEvent.objects.filter(action="collection.writers", target="team").count() == 2


def test_cli_adds_a_writable_collection(tmp_path, run_cli):
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "n.md").write_text("# N\n")
    code, _, err = run_cli("collection", "add", str(tmp_path / "w"), "--name", "w", "--writable")
    assert code == 0, err
    assert Collection.objects.get(name="w").writable


def test_api_patch_sets_writers_for_staff_with_write_scope_only(team):
    staff = make_user("boss", staff=True)
    make_user("ada")
    body = {"writable": True, "writer_users": ["ada"]}
    refused = api_client(staff, write=False).patch("/api/collections/team", body, content_type="application/json")
    assert refused.status_code == 403
    member = api_client(make_user("member")).patch("/api/collections/team", body, content_type="application/json")
    assert member.status_code == 403
    done = api_client(staff).patch("/api/collections/team", body, content_type="application/json")
    assert done.status_code == 200, done.content
    assert (done.json()["writable"], done.json()["writer_users"]) == (True, ["ada"])


def test_admin_sets_writers_through_the_service(team):
    root = make_user("root", superuser=True)
    ada = make_user("ada")
    client = web_client(root)
    page = client.get(f"/admin/indexing/collection/{team.pk}/change/")
    assert page.status_code == 200 and "Who writes notes" in page.content.decode()
    form = page.context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None and k not in {"shared_users", "shared_groups"}}
    data.update(
        {
            "ignore_patterns": json.dumps(team.ignore_patterns),
            "writable": "on",
            "writer_users": [ada.pk],
        }
    )
    data.pop("writer_groups", None)
    response = client.post(f"/admin/indexing/collection/{team.pk}/change/", data)
    assert response.status_code == 302, response.content.decode()[:3000]
    team.refresh_from_db()
    assert team.writable and list(team.writer_users.all()) == [ada]
    assert AuditEvent.objects.filter(action="collection.writers", target="team").exists()


def test_web_collections_page_shows_and_sets_writers_for_staff(team):
    staff = make_user("boss", staff=True)
    ada = make_user("ada")
    client = web_client(staff)
    page = client.get("/collections/").content.decode()
    assert "read-only" in page and "Save writers" in page
    response = client.post("/collections/team/writers/", {"writable": "on", "users": ["ada"]})
    assert response.status_code == 302
    team.refresh_from_db()
    assert team.writable and list(team.writer_users.all()) == [ada]
    assert "writable" in client.get("/collections/").content.decode()
    member = web_client(make_user("member"))
    member_page = member.get("/collections/").content.decode()
    assert "Save writers" not in member_page and "writable" in member_page and "ada" not in member_page
    assert member.post("/collections/team/writers/", {"writable": ""}).status_code in (302, 403)
    team.refresh_from_db()
    assert team.writable
