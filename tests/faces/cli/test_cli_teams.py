"""The CLI face of teams: `pmd collection share|show|list`, `pmd group …`, scoped `pmd token create|list`
and `pmd audit`, run in-process against the test database (the CLI acts as the local user)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from indexing.models import ApiToken, AuditEvent, Collection
from tests.support.factories import make_user

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def people(django_user_model):
    return {name: make_user(name) for name in ("alice", "bob", "carol")}


def _show(run_cli, name: str = "notes") -> dict:
    code, out, err = run_cli("collection", "show", name, "--json")
    assert code == 0, err
    return json.loads(out)


def test_share_private_then_everyone_shows_in_show_and_list(run_cli, indexed_collection):
    assert _show(run_cli)["visibility"] == "everyone"
    code, out, err = run_cli("collection", "share", "notes", "--private")
    assert code == 0, err
    assert "notes: private" in out
    assert Collection.objects.get(name="notes").visibility == "private"
    code, out, _ = run_cli("collection", "show", "notes")
    assert code == 0
    assert "visibility: private" in out
    assert "owner: - (no owner" in out  # made private from the CLI: nobody owns it
    data = _show(run_cli)
    assert (data["visibility"], data["owner"], data["shared_users"], data["shared_groups"]) == ("private", None, [], [])
    code, out, _ = run_cli("collection", "list")
    header, row = out.splitlines()[:2]
    assert "visible to" in header and row.split()[0] == "notes" and row.rstrip().endswith("private")

    code, out, err = run_cli("collection", "share", "notes", "--everyone", "--json")
    assert code == 0, err
    assert json.loads(out)["visibility"] == "everyone"
    assert "visibility: everyone" in run_cli("collection", "show", "notes")[1]


def test_share_with_groups_and_people_combined(run_cli, indexed_collection, people):
    assert run_cli("group", "create", "eng")[0] == 0
    assert run_cli("group", "create", "hr")[0] == 0
    code, out, err = run_cli("collection", "share", "notes", "--group", "eng", "--group", "hr", "--user", "carol")
    assert code == 0, err
    assert "shared with groups eng, hr and person carol" in out
    collection = Collection.objects.get(name="notes")
    assert collection.visibility == "shared"
    assert sorted(g.name for g in collection.shared_groups.all()) == ["eng", "hr"]
    assert [u.username for u in collection.shared_users.all()] == ["carol"]
    data = _show(run_cli)
    assert (data["shared_groups"], data["shared_users"]) == (["eng", "hr"], ["carol"])
    assert "visibility: shared with groups eng, hr and person carol" in run_cli("collection", "show", "notes")[1]
    assert "groups: eng, hr; people: carol" in run_cli("collection", "list")[1]
    listed = json.loads(run_cli("collection", "list", "--json")[1])
    assert listed[0]["visibility"] == "shared" and listed[0]["shared_users"] == ["carol"]
    # Back to everyone: the chosen groups and people are cleared.
    assert run_cli("collection", "share", "notes", "--everyone")[0] == 0
    data = _show(run_cli)
    assert (data["visibility"], data["shared_groups"], data["shared_users"]) == ("everyone", [], [])


def test_share_with_a_missing_group_or_user_is_an_error_and_changes_nothing(run_cli, indexed_collection, people):
    assert run_cli("collection", "share", "notes", "--user", "bob")[0] == 0
    events = AuditEvent.objects.count()
    code, out, err = run_cli("collection", "share", "notes", "--group", "ghosts", "--user", "carol")
    assert code == 1 and out == ""
    assert "no group named 'ghosts'" in err and "Traceback" not in err
    code, _, err = run_cli("collection", "share", "notes", "--user", "nobody")
    assert code == 1 and "no user named 'nobody'" in err
    data = _show(run_cli)
    assert (data["visibility"], data["shared_users"], data["shared_groups"]) == ("shared", ["bob"], [])
    assert AuditEvent.objects.count() == events
    code, _, err = run_cli("collection", "share", "nowhere", "--private")
    assert code == 1 and "no collection named 'nowhere'" in err


@pytest.mark.parametrize(
    "flags", [(), ("--everyone", "--private"), ("--private", "--user", "bob"), ("--everyone", "--group", "eng")]
)
def test_share_needs_exactly_one_choice(run_cli, indexed_collection, people, flags):
    code, out, err = run_cli("collection", "share", "notes", *flags)
    assert code == 1 and out == ""
    assert "exactly one of --everyone, --private, or --group/--user" in err
    assert Collection.objects.get(name="notes").visibility == "everyone"


def test_group_create_add_remove_list_delete(run_cli, people):
    code, out, err = run_cli("group", "create", "eng")
    assert code == 0 and "created group eng" in out, err
    code, _, err = run_cli("group", "create", "eng")
    assert code == 1 and "already exists" in err
    code, out, err = run_cli("group", "add", "eng", "alice", "bob")
    assert code == 0, err
    assert "members now: alice, bob" in out
    assert sorted(u.username for u in Group.objects.get(name="eng").user_set.all()) == ["alice", "bob"]
    code, out, _ = run_cli("group", "list", "--json")
    assert json.loads(out) == [{"name": "eng", "members": ["alice", "bob"]}]
    code, out, err = run_cli("group", "remove", "eng", "alice")
    assert code == 0, err
    assert [u.username for u in Group.objects.get(name="eng").user_set.all()] == ["bob"]
    # An unknown person: an error, and the group is as it was.
    code, _, err = run_cli("group", "add", "eng", "carol", "nobody")
    assert code == 1 and "no user named 'nobody'" in err
    assert [u.username for u in Group.objects.get(name="eng").user_set.all()] == ["bob"]
    code, _, err = run_cli("group", "add", "ghosts", "carol")
    assert code == 1 and "no group named 'ghosts'" in err
    code, out, _ = run_cli("group", "list")
    header, row = out.splitlines()[:2]
    assert header.split() == ["group", "members"] and row.split() == ["eng", "bob"]
    assert run_cli("group", "delete", "eng")[0] == 0
    assert not Group.objects.exists()
    assert json.loads(run_cli("group", "list", "--json")[1]) == []


def test_token_create_with_write_collection_and_expiry(run_cli, indexed_collection, people):
    code, out, err = run_cli(
        "token", "create", "--user", "alice", "--name", "agent", "--write", "--collection", "notes", "--expires", "7d"
    )
    assert code == 0, err
    raw = out.strip()
    assert out.count("\n") == 1 and raw.startswith("pmd_")  # stdout: the token alone
    assert "read and write" in err and "collections notes" in err and "expires 20" in err
    assert "not shown again" in err
    token = ApiToken.objects.get(name="agent")
    assert token.can_write is True
    assert [c.name for c in token.collections.all()] == ["notes"]
    assert abs(token.expires - (timezone.now() + timedelta(days=7))) < timedelta(minutes=1)

    code, out, _ = run_cli("token", "list", "--json")
    row = json.loads(out)[0]
    assert (row["write"], row["collections"], row["expired"]) == (True, ["notes"], False)
    assert row["expires"] == token.expires.isoformat()
    code, out, _ = run_cli("token", "list")
    line = next(line for line in out.splitlines() if "agent" in line)
    assert " rw " in line and "notes" in line and "active" in line and raw not in out


def test_token_create_defaults_to_read_only_everything_never_expiring(run_cli, indexed_collection, people):
    code, out, err = run_cli("token", "create", "--user", "bob", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert (data["write"], data["collections"], data["expires"]) == (False, [], None)
    assert data["token"].startswith("pmd_")
    code, out, err = run_cli("token", "create", "--user", "bob", "--name", "plain")
    assert code == 0
    assert "read-only; all collections bob can see; never expires" in err
    token = ApiToken.objects.get(name="plain")
    assert (token.can_write, token.collections.count(), token.expires) == (False, 0, None)
    line = next(line for line in run_cli("token", "list")[1].splitlines() if "plain" in line)
    assert " ro " in line and " all " in line and "never" in line


def test_token_create_refuses_bad_expiry_and_unknown_or_hidden_collections(run_cli, indexed_collection, people):
    code, out, err = run_cli("token", "create", "--user", "alice", "--expires", "soon")
    assert code == 1 and out == ""
    assert "'soon' is not an expiry" in err and "Traceback" not in err
    code, out, err = run_cli("token", "create", "--user", "alice", "--collection", "nowhere")
    assert code == 1 and out == ""
    assert "no collection named 'nowhere'" in err
    # A collection alice may not see is, for her token, one that does not exist.
    assert run_cli("collection", "share", "notes", "--user", "bob")[0] == 0
    code, out, err = run_cli("token", "create", "--user", "alice", "--collection", "notes")
    assert code == 1 and "no collection named 'notes'" in err
    assert not ApiToken.objects.exists()
    assert not AuditEvent.objects.filter(action="token.create").exists()
    code, _, err = run_cli("token", "create", "--user", "bob", "--collection", "notes")
    assert code == 0, err


def test_token_list_marks_expired_and_revoked(run_cli, people):
    assert run_cli("token", "create", "--user", "alice", "--name", "old", "--expires", "1h")[0] == 0
    assert run_cli("token", "create", "--user", "alice", "--name", "gone")[0] == 0
    ApiToken.objects.filter(name="old").update(expires=timezone.now() - timedelta(minutes=5))
    assert run_cli("token", "revoke", str(ApiToken.objects.get(name="gone").pk))[0] == 0
    code, out, _ = run_cli("token", "list", "--all", "--json")
    assert code == 0
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["old"]["expired"] is True and rows["old"]["revoked"] is None
    assert rows["gone"]["expired"] is False and rows["gone"]["revoked"] is not None
    lines = run_cli("token", "list", "--all")[1].splitlines()
    assert next(line for line in lines if " old " in line).rstrip().endswith("expired")
    assert next(line for line in lines if " gone " in line).rstrip().endswith("revoked")


def test_audit_lists_share_and_token_creation_newest_first(run_cli, indexed_collection, people):
    assert run_cli("collection", "share", "notes", "--private")[0] == 0
    assert run_cli("token", "create", "--user", "alice", "--collection", "notes")[0] == 1  # hidden from alice
    assert run_cli("token", "create", "--user", "bob", "--name", "bot", "--write")[0] == 0
    code, out, err = run_cli("audit", "--json")
    assert code == 0, err
    events = json.loads(out)
    assert [e["action"] for e in events][:2] == ["token.create", "collection.share"]
    token_event, share_event = events[:2]
    assert token_event["actor"].startswith("local user") and share_event["actor"].startswith("local user")
    assert token_event["target"].endswith("of bob") and token_event["detail"]["write"] is True
    assert share_event["target"] == "notes" and share_event["detail"]["visibility"] == "private"

    code, out, _ = run_cli("audit")
    lines = out.splitlines()
    assert lines[0].split() == ["when", "who", "action", "target", "detail"]
    assert "token.create" in lines[1] and "local user" in lines[1] and "write=yes" in lines[1]
    assert "collection.share" in lines[2] and "notes" in lines[2] and "visibility=private" in lines[2]

    only_tokens = json.loads(run_cli("audit", "--action", "token", "--json")[1])
    assert [e["action"] for e in only_tokens] == ["token.create"]
    about_notes = json.loads(run_cli("audit", "--target", "NOTES", "--json")[1])
    assert about_notes[0]["action"] == "collection.share"
    assert all("notes" in e["target"] for e in about_notes)
    assert len(json.loads(run_cli("audit", "--limit", "1", "--json")[1])) == 1
    code, _, err = run_cli("audit", "--limit", "0")
    assert code == 1 and "--limit" in err
    assert "no events match" in run_cli("audit", "--action", "nothing.like.this")[1]


def test_share_and_show_name_the_owner(run_cli, indexed_collection, people):
    Collection.objects.filter(name="notes").update(owner=people["alice"])
    code, out, err = run_cli("collection", "share", "notes", "--private")
    assert code == 0, err
    assert out.strip() == "notes: private (owner: alice)"
    assert "owner: alice" in run_cli("collection", "show", "notes")[1]
    assert _show(run_cli)["owner"] == "alice"
