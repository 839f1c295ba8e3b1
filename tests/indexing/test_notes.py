"""Writing notes through pmd (indexing.services.notes): allowed only where a person allowed it, safe on
disk against a hostile caller, no lost update, attributed, reversible and searchable at once."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from indexing import errors
from indexing.access import Access
from indexing.models import AuditEvent, Document
from indexing.noteedits import NoteEdit
from indexing.services.notes import note_delete, note_edit, note_move_to, note_restore, note_write
from search import HistoryRequest, SearchRequest, history_search, search_run
from tests.support.factories import make_group, make_user, make_vault
from tests.support.history_repo import git

pytestmark = pytest.mark.django_db

NOTES = {
    "welcome.md": "# Welcome\n\nStart here.\n",
    "meetings/standup.md": "---\ntags: [meeting]\nstatus: draft\n---\n# Standup\n\n## Decisions\n\nNone yet.\n\n"
    "## Actions\n\n- review the budget\n",
}
LOCAL = Access.local_user()


@pytest.fixture
def vault(tmp_path):
    collection = make_vault(tmp_path / "team", NOTES, name="team")
    collection.writable = True
    collection.save()
    return collection


def _found(word: str, access: Access = LOCAL) -> list[str]:
    return [r.uri for r in search_run(SearchRequest(query=word, access=access)).results]


def test_a_written_note_is_in_the_keyword_index_when_the_call_returns(vault):
    change = note_write(
        access=LOCAL, collection="team", path="decisions/quokka.md", content="# Quokka\n\nWe chose quokkas.\n"
    )
    assert change.indexed and change.action == "note.create"
    assert _found("quokkas") == ["pmd://team/decisions/quokka.md"]
    assert (vault.root_path + "/decisions/quokka.md") and Path(
        vault.root_path + "/decisions/quokka.md"
    ).read_text().startswith("# Quokka")


def test_writing_over_an_existing_note_is_refused_unless_replace_is_asked(vault):
    with pytest.raises(errors.NoteExists):
        note_write(access=LOCAL, collection="team", path="welcome.md", content="gone")
    assert Path(os.path.join(vault.root_path, "welcome.md")).read_text() == NOTES["welcome.md"]
    change = note_write(
        access=LOCAL, collection="team", path="welcome.md", content="# Welcome\n\nnew text\n", replace=True
    )
    assert change.action == "note.replace" and change.old_hash and change.new_hash != change.old_hash


def test_replace_keeps_the_files_mode(vault):
    path = os.path.join(vault.root_path, "welcome.md")
    os.chmod(path, 0o640)
    note_write(access=LOCAL, collection="team", path="welcome.md", content="x\n", replace=True)
    assert os.stat(path).st_mode & 0o777 == 0o640
    assert not [n for n in os.listdir(vault.root_path) if n.endswith(".pmd-tmp")]


@pytest.mark.parametrize(
    "path",
    [
        "../outside.md",
        "/etc/passwd.md",
        "meetings/../../outside.md",
        "..%2foutside.md",
        ".git/config",
        ".obsidian/app.md",
        "meetings/.hidden.md",
        "notes\\..\\x.md",
        "",
        "a//b.md",
        "script.sh",  # outside the mask (**/*.md)
        "report.pdf",
    ],
)
def test_paths_that_could_leave_the_collection_or_its_mask_are_refused(vault, path, tmp_path):
    before = sorted(p for p in (tmp_path).rglob("*"))
    with pytest.raises(errors.NotePathRefused):
        note_write(access=LOCAL, collection="team", path=path, content="# pwned\n")
    assert sorted(p for p in (tmp_path).rglob("*")) == before


def test_a_symbolic_link_on_the_way_is_never_followed(vault, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target.md").write_text("theirs\n")
    os.symlink(outside, os.path.join(vault.root_path, "linked"))
    os.symlink(outside / "target.md", os.path.join(vault.root_path, "link.md"))
    for path in ("linked/new.md", "linked/target.md", "link.md"):
        with pytest.raises(errors.NotePathRefused):
            note_write(access=LOCAL, collection="team", path=path, content="# pwned\n", replace=True)
    assert sorted(os.listdir(outside)) == ["target.md"] and (outside / "target.md").read_text() == "theirs\n"


def test_a_note_over_the_size_cap_is_refused(vault, settings):
    settings.PMD_NOTE_MAX_BYTES = 100
    with pytest.raises(errors.NoteTooLarge):
        note_write(access=LOCAL, collection="team", path="big.md", content="x" * 101)
    assert not os.path.exists(os.path.join(vault.root_path, "big.md"))


@pytest.mark.parametrize("content", ["before\x00after", "half a pair: \ud800"], ids=["nul", "lone-surrogate"])
def test_a_note_that_is_not_text_is_refused_and_nothing_is_written(vault, content):
    with pytest.raises(errors.InvalidRequest):
        note_write(access=LOCAL, collection="team", path="binary.md", content=content)
    assert not os.path.exists(os.path.join(vault.root_path, "binary.md"))
    edit = NoteEdit("append", content=content)
    standup = Path(vault.root_path) / "meetings/standup.md"
    before = standup.read_bytes()
    with pytest.raises(errors.InvalidRequest):
        note_edit(
            access=LOCAL, note="pmd://team/meetings/standup.md", base_hash=_hash("meetings/standup.md"), edit=edit
        )
    assert standup.read_bytes() == before


def _hash(path: str) -> str:
    return Document.objects.get(collection__name="team", path=path).content_id


def test_a_persons_edit_on_disk_between_read_and_write_is_a_conflict_with_the_current_hash(vault):
    read = _hash("meetings/standup.md")  # what the agent read
    path = os.path.join(vault.root_path, "meetings/standup.md")
    with open(path, "a") as handle:  # a person, in their editor
        handle.write("\nAdded in Obsidian.\n")
    edit = NoteEdit("append", content="- agent's line")
    with pytest.raises(errors.NoteChanged) as refused:
        note_edit(access=LOCAL, note="pmd://team/meetings/standup.md", base_hash=read, edit=edit)
    assert refused.value.http_status == 409
    current = refused.value.current_hash
    assert (
        current != read
        and "Added in Obsidian." in Path(path).read_text()
        and "agent's line" not in Path(path).read_text()
    )
    note_edit(access=LOCAL, note="pmd://team/meetings/standup.md", base_hash=current[:6], edit=edit)
    text = Path(path).read_text()
    assert "Added in Obsidian." in text and text.rstrip().endswith("- agent's line")


def test_edit_operations(vault):
    note = "pmd://team/meetings/standup.md"
    path = os.path.join(vault.root_path, "meetings/standup.md")

    def edit(**fields):
        return note_edit(access=LOCAL, note=note, base_hash=_hash("meetings/standup.md"), edit=NoteEdit(**fields))

    edit(operation="replace_section", heading="Decisions", content="We ship on Friday.")
    edit(operation="append", heading="Decisions", content="And celebrate.")
    edit(operation="prepend", heading="Actions", content="- first action")
    edit(operation="set_field", field="status", value="final")
    edit(operation="remove_field", field="tags")
    edit(operation="replace_text", old_text="review the budget", new_text="approve the budget")
    text = Path(path).read_text()
    assert text == (
        "---\nstatus: final\n---\n# Standup\n\n## Decisions\n\nWe ship on Friday.\nAnd celebrate.\n\n"
        "## Actions\n- first action\n\n- approve the budget\n"
    )
    with pytest.raises(errors.NoteEditRefused, match="found 0 times"):
        edit(operation="replace_text", old_text="nowhere", new_text="x")
    with pytest.raises(errors.NoteEditRefused, match="no heading"):
        edit(operation="replace_section", heading="Missing", content="x")
    assert Path(path).read_text() == text


@pytest.mark.django_db(transaction=True)
def test_two_writers_of_one_note_at_once_exactly_one_wins_and_nothing_is_lost(vault):
    """Run in threads with their own connections: the lock on the note lets one through; the
    other, based on the same version, gets a conflict."""
    from tests.indexing.test_concurrent_indexing import run_together

    read = _hash("welcome.md")
    won: list[int] = []

    def work(i: int) -> None:
        note_edit(
            access=LOCAL, note="pmd://team/welcome.md", base_hash=read, edit=NoteEdit("append", content=f"writer {i}")
        )
        won.append(i)

    failures = run_together(2, work)
    assert len(won) == 1 and len(failures) == 1 and isinstance(failures[0], errors.NoteChanged), failures
    text = Path(os.path.join(vault.root_path, "welcome.md")).read_text()
    assert f"writer {won[0]}" in text and f"writer {1 - won[0]}" not in text


def test_delete_moves_to_the_trash_which_no_search_reads_and_restore_brings_it_back(vault):
    change = note_delete(access=LOCAL, collection="team", path="welcome.md")
    assert change.trash_path == ".trash/welcome.md"
    assert os.path.exists(os.path.join(vault.root_path, ".trash/welcome.md"))
    assert not os.path.exists(os.path.join(vault.root_path, "welcome.md"))
    assert _found("Start here") == []
    note_write(access=LOCAL, collection="team", path="welcome.md", content="# Welcome again\n")
    again = note_delete(access=LOCAL, collection="team", path="welcome.md")
    assert again.trash_path == ".trash/welcome (2).md"
    restored = note_restore(access=LOCAL, collection="team", trash_path=".trash/welcome.md")
    assert restored.path == "welcome.md" and _found("Start here") == ["pmd://team/welcome.md"]


def test_move_never_overwrites(vault):
    with pytest.raises(errors.NoteExists):
        note_move_to(access=LOCAL, collection="team", path="welcome.md", new_path="meetings/standup.md")
    change = note_move_to(access=LOCAL, collection="team", path="welcome.md", new_path="archive/welcome.md")
    assert change.old_path == "welcome.md" and _found("Start here") == ["pmd://team/archive/welcome.md"]


def test_every_write_is_in_the_audit_trail_with_user_token_path_and_hashes(vault):
    from indexing.services.tokens import token_create

    member = make_user("writer")
    vault.writer_users.add(member)
    token = token_create(user="writer", name="agent", access=LOCAL, can_write=True).token
    change = note_write(access=Access.for_token(token), collection="team", path="log.md", content="# Log\n")
    event = AuditEvent.objects.get(action="note.create")
    assert event.actor == member and event.target == "team/log.md"
    assert event.detail["token"] == token.prefix and event.detail["new_hash"] == change.new_hash
    assert event.detail["old_hash"] == ""


def test_a_collection_is_read_only_unless_made_writable_and_then_only_for_its_writers(vault, tmp_path):
    make_vault(tmp_path / "ro", {"a.md": "# A\n"}, name="readonly")
    member, writer, grouped = make_user("member"), make_user("writer"), make_user("grouped")
    vault.writer_users.add(writer)
    vault.writer_groups.add(make_group("editors", grouped))
    with pytest.raises(errors.AccessDenied, match="read-only"):
        note_write(access=LOCAL, collection="readonly", path="b.md", content="x")
    with pytest.raises(errors.AccessDenied, match="not write"):
        note_write(access=Access.for_user(member), collection="team", path="b.md", content="x")
    note_write(access=Access.for_user(writer), collection="team", path="b.md", content="x")
    note_write(access=Access.for_user(grouped), collection="team", path="c.md", content="x")


def test_in_a_git_work_tree_each_write_is_a_commit_by_the_account_found_by_history_search(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "first.md").write_text("# First\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "start")
    collection = make_vault(repo, {}, name="repo")
    collection.writable = True
    collection.save()
    member = make_user("ada", email="ada@example.org", first_name="Ada", last_name="Lovelace")
    collection.writer_users.add(member)
    change = note_write(
        access=Access.for_user(member),
        collection="repo",
        path="decisions/otters.md",
        content="# Otters\n",
        message="Record the otter decision",
    )
    assert change.commit
    log = git(repo, "log", "-1", "--format=%an <%ae>|%s")
    assert log == "Ada Lovelace <ada@example.org>|Record the otter decision"
    assert git(repo, "status", "--porcelain") == ""
    assert subprocess.run(["git", "-C", str(repo), "remote"], capture_output=True, text=True).stdout == ""
    deleted = note_delete(access=Access.for_user(member), collection="repo", path="decisions/otters.md")
    assert deleted.commit and "decisions/otters.md" not in git(repo, "ls-files")
    found = history_search(HistoryRequest(query="otter decision", access=LOCAL, mode="keyword"))
    assert [r.sha for r in found.results][:1] == [change.commit]


def test_a_write_asks_for_the_embedding_of_its_collection(vault, monkeypatch):
    """Asked for this collection alone, so its job is not behind a whole index's."""
    from indexing.services import notes

    asked = []
    monkeypatch.setattr(notes, "embedding_request", lambda **kw: asked.append(kw))
    note_write(access=LOCAL, collection="team", path="embed-me.md", content="# Embed me\n")
    assert [a["collection"] for a in asked] == [vault]


def test_recent_activity_tells_pmd_disk_and_commits_apart(vault):
    from datetime import timedelta

    from django.utils import timezone

    from indexing.selectors import activity_since, notes_activity
    from indexing.services.scanning import collection_index

    since = timezone.now() - timedelta(minutes=1)
    ada = make_user("ada")
    vault.writer_users.add(ada)
    note_write(access=Access.for_user(ada), collection="team", path="by-agent.md", content="# Agent\n")
    Path(vault.root_path, "by-hand.md").write_text("# By hand\n")
    collection_index(vault)
    seen = {(a.path, a.via, a.action, a.by) for a in notes_activity(access=LOCAL, since=since)}
    assert ("by-agent.md", "pmd", "created", "ada") in seen and ("by-hand.md", "disk", "changed", "") in seen
    assert notes_activity(access=Access.for_user(make_user("nobody")), since=activity_since("1h"))[0].path
    with pytest.raises(errors.InvalidRequest):
        activity_since("yesterday-ish")


def test_a_member_who_does_not_see_a_collection_sees_none_of_its_activity(vault, tmp_path):
    from indexing.models import Collection
    from indexing.selectors import activity_since, notes_activity

    Collection.objects.filter(pk=vault.pk).update(visibility=Collection.Visibility.PRIVATE)
    note_write(access=LOCAL, collection="team", path="secret.md", content="# Secret\n")
    assert notes_activity(access=Access.for_user(make_user("nobody")), since=activity_since("1h")) == []


def test_huge_content_through_the_api_is_refused_before_anything_is_written(vault, settings):
    from tests.support.factories import api_client

    root = make_user("root", superuser=True)
    client = api_client(root)
    settings.PMD_NOTE_MAX_BYTES = 1000
    over_cap = client.post(
        "/api/notes", {"collection": "team", "path": "big.md", "content": "x" * 1001}, content_type="application/json"
    )
    assert over_cap.status_code == 413 and over_cap.json()["code"] == "note_too_large"
    over_body = client.post(
        "/api/notes",
        {"collection": "team", "path": "big.md", "content": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)},
        content_type="application/json",
    )
    assert over_body.status_code == 413
    assert not Path(vault.root_path, "big.md").exists()


def test_a_stale_edit_through_the_api_is_a_409_with_the_current_hash(vault):
    from tests.support.factories import api_client

    client = api_client(make_user("root", superuser=True))
    read = _hash("welcome.md")
    Path(vault.root_path, "welcome.md").write_text("# Welcome\n\nChanged by a person.\n")
    response = client.post(
        "/api/notes/edit",
        {"note": "pmd://team/welcome.md", "base_hash": read, "operation": "append", "content": "x"},
        content_type="application/json",
    )
    assert response.status_code == 409 and response.json()["code"] == "note_changed"
    assert response.json()["current_hash"] != read and len(response.json()["current_hash"]) == 64


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give files away")
def test_as_root_new_notes_and_folders_are_owned_like_their_folder_and_replaced_ones_keep_their_owner(vault):
    root = Path(vault.root_path)
    os.chown(root, 1234, 1235)
    os.chown(root / "welcome.md", 4321, 4322)
    note_write(access=LOCAL, collection="team", path="new/deeper.md", content="# Deeper\n")
    for made in (root / "new", root / "new/deeper.md"):
        assert (made.stat().st_uid, made.stat().st_gid) == (1234, 1235), made
    note_write(access=LOCAL, collection="team", path="welcome.md", content="# Replaced\n", replace=True)
    assert ((root / "welcome.md").stat().st_uid, (root / "welcome.md").stat().st_gid) == (4321, 4322)


def test_an_edit_made_in_an_editor_while_pmd_writes_is_not_overwritten(vault, monkeypatch):
    """An editor takes no lock of pmd's: the version is checked again just before the rename."""
    from indexing import notefiles

    path = Path(vault.root_path, "welcome.md")
    real_fsync = os.fsync
    typed = []

    def person_types_while_pmd_writes(fd):
        real_fsync(fd)
        if not typed:
            typed.append(True)
            path.write_text("# Welcome\n\nTyped in Obsidian just now.\n")

    monkeypatch.setattr(notefiles.os, "fsync", person_types_while_pmd_writes)
    with pytest.raises(errors.NoteChanged):
        note_edit(
            access=LOCAL,
            note="pmd://team/welcome.md",
            base_hash=_hash("welcome.md"),
            edit=NoteEdit("append", content="x"),
        )
    assert path.read_text() == "# Welcome\n\nTyped in Obsidian just now.\n"
    assert not [n for n in os.listdir(vault.root_path) if n.endswith(".pmd-tmp")]


def test_pmd_audit_lists_note_writes(vault, run_cli):
    change = note_write(access=LOCAL, collection="team", path="audited.md", content="# Audited\n")
    code, out, err = run_cli("audit", "--action", "note", "--json")
    assert code == 0, err
    [event] = json.loads(out)
    assert event["action"] == "note.create" and event["target"] == "team/audited.md"
    assert event["detail"]["new_hash"] == change.new_hash


def test_recent_activity_shows_a_commit_made_outside_pmd(tmp_path):
    from django.utils import timezone

    from indexing.selectors import activity_since, notes_activity
    from indexing.services.history import history_index

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "plan.md").write_text("# Plan\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Plan the quarter", date=timezone.now().isoformat())
    collection = make_vault(repo, {}, name="repo")
    history_index(collection)
    found = [(a.via, a.path, a.by) for a in notes_activity(access=LOCAL, since=activity_since("1h"))]
    assert ("commit", "plan.md", "Alice Martin <alice@example.org>") in found


def test_api_recent_activity_lists_what_changed_in_the_collections_named(vault, tmp_path):
    from tests.support.factories import api_client

    make_vault(tmp_path / "other", {"o.md": "# O\n"}, name="other")
    note_write(access=LOCAL, collection="team", path="fresh.md", content="# Fresh\n")
    client = api_client(make_user("member"), write=False)
    response = client.get("/api/notes/activity", {"since": "1h", "collection": ["team"]})
    assert response.status_code == 200, response.content
    changes = response.json()["changes"]
    assert changes[0]["uri"] == "pmd://team/fresh.md" and changes[0]["via"] == "pmd"
    assert {c["collection"] for c in changes} == {"team"}
    assert client.get("/api/notes/activity", {"since": "soon"}).status_code == 400
