"""What a collection may read: never a file outside its folder, never pmd's own data or /proc.

Symlinks are followed only while they stay inside the collection folder, and which folders
may become collections depends on who asks: staff through the web UI, API and admin only
under PMD_COLLECTION_ROOTS; nobody, the local CLI included, `/`, `$PMD_HOME` or a pseudo
file system.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client

from indexing.access import Access
from indexing.errors import CollectionPathRefused, DocumentNotFound
from indexing.models import Collection, Document, FileProblem
from indexing.selectors import document_resolve
from indexing.services.collections import (
    collection_create,
)
from indexing.services.refresh import collections_refresh
from indexing.services.scanning import collection_file_open, collection_files, collection_index
from tests.support.factories import api_client, make_user

pytestmark = pytest.mark.django_db

SECRET = "TOP-SECRET-OUTSIDE-THE-COLLECTION"


def _paths(collection) -> set[str]:
    return set(Document.objects.filter(collection=collection, active=True).values_list("path", flat=True))


def _problems(collection) -> dict[str, str]:
    return dict(FileProblem.objects.filter(collection=collection).values_list("path", "message"))


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder next to the collection, holding what a link must not reach."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.md").write_text(f"# Secret\n\n{SECRET}\n")
    return folder


@pytest.fixture
def notes(tmp_path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "welcome.md").write_text("# Welcome\n\nA harmless note.\n")
    return folder


def _api_client(*, staff: bool = False) -> Client:
    return api_client(make_user("staffer" if staff else "member", password="pw-123-pw-123", staff=staff))


# --- symlinks inside a collection ------------------------------------------------------------


def test_file_symlink_out_of_the_collection_is_skipped_recorded_and_not_served(notes, outside):
    (notes / "passwd.md").symlink_to(outside / "secret.md")
    (notes / "etc-passwd.md").symlink_to("/etc/passwd")
    collection = collection_create(path=notes, name="notes")
    report = collection_index(collection)

    assert _paths(collection) == {"welcome.md"}
    problems = _problems(collection)
    assert "points outside the collection" in problems["passwd.md"]
    assert "points outside the collection" in problems["etc-passwd.md"]
    assert any(i.path == "passwd.md" for i in report.issues)
    assert not Document.objects.filter(content__body__contains=SECRET).exists()
    with pytest.raises(DocumentNotFound):
        document_resolve("pmd://notes/passwd.md", access=Access.local_user())
    with pytest.raises(DocumentNotFound):
        document_resolve(str(notes / "passwd.md"), access=Access.local_user())
    response = _api_client().get("/api/get", {"ref": "pmd://notes/passwd.md"})
    assert response.status_code == 404 and SECRET not in response.content.decode()


def test_folder_symlink_out_of_the_collection_is_not_walked(notes, outside):
    (notes / "elsewhere").symlink_to(outside)
    (notes / "everything").symlink_to("/")
    collection = collection_create(path=notes, name="notes")
    collection_index(collection)

    assert _paths(collection) == {"welcome.md"}
    problems = _problems(collection)
    assert "points outside the collection" in problems["elsewhere"]
    assert "points outside the collection" in problems["everything"]


def test_symlinks_that_stay_inside_the_collection_are_followed(notes):
    (notes / "real").mkdir()
    (notes / "real" / "deep.md").write_text("# Deep\n\nInside the collection.\n")
    (notes / ".drafts").mkdir()  # hidden: walked only through the link to it
    (notes / ".drafts" / "idea.md").write_text("# Idea\n")
    (notes / "drafts").symlink_to(notes / ".drafts")  # absolute link, to a folder inside
    (notes / "alias").symlink_to("real")  # a second way into a folder that is walked anyway
    (notes / "shortcut.md").symlink_to("real/deep.md")  # relative link, to a file inside
    collection = collection_create(path=notes, name="notes")
    collection_index(collection)

    # Each folder once, under its own name: real/ is not lost to alias/ sorting first.
    assert _paths(collection) == {"welcome.md", "real/deep.md", "drafts/idea.md", "shortcut.md"}
    assert document_resolve("pmd://notes/shortcut.md", access=Access.local_user()).document.title == "Deep"
    assert "same folder as real" in _problems(collection)["alias"]


def test_symlink_loops_inside_the_collection_end_the_walk(notes):
    (notes / "sub").mkdir()
    (notes / "sub" / "n.md").write_text("# N\n")
    (notes / "sub" / "up").symlink_to("..")  # a folder loop
    (notes / "ping.md").symlink_to("pong.md")  # a file loop
    (notes / "pong.md").symlink_to("ping.md")
    collection = collection_create(path=notes, name="notes")
    report = collection_index(collection)

    assert _paths(collection) == {"welcome.md", "sub/n.md"}
    assert any("symlink loop" in i.message for i in report.issues)


def test_symlink_planted_by_git_pull_after_the_first_index_is_not_indexed(tmp_path, outside):
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "init.defaultBranch=main"]
    origin = tmp_path / "origin"
    origin.mkdir()
    (origin / "readme.md").write_text("# Readme\n")
    subprocess.run([*git, "init", "-q", str(origin)], check=True)
    subprocess.run([*git, "-C", str(origin), "add", "."], check=True)
    subprocess.run([*git, "-C", str(origin), "commit", "-qm", "first"], check=True)
    clone = tmp_path / "clone"
    subprocess.run([*git, "clone", "-q", str(origin), str(clone)], check=True)
    collection = collection_create(path=clone, name="repo")
    collection_index(collection)
    assert _paths(collection) == {"readme.md"}

    (origin / "shadow.md").symlink_to(outside / "secret.md")
    (origin / "linked").symlink_to(outside)
    subprocess.run([*git, "-C", str(origin), "add", "."], check=True)
    subprocess.run([*git, "-C", str(origin), "commit", "-qm", "plant links"], check=True)
    [refreshed] = collections_refresh(names=["repo"], pull=True, access=Access.local_user()).collections
    pulled, error = refreshed.pulled, refreshed.problem

    assert pulled.ok and (clone / "shadow.md").is_symlink() and error is None
    assert _paths(collection) == {"readme.md"}
    assert {"shadow.md", "linked"} <= set(_problems(collection))
    assert not Document.objects.filter(content__body__contains=SECRET).exists()


def test_git_pull_runs_no_hook_and_pulls_only_a_checkout_s_top_folder(tmp_path):
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "init.defaultBranch=main"]
    origin = tmp_path / "origin"
    (origin / "docs").mkdir(parents=True)
    (origin / "readme.md").write_text("# Readme\n")
    (origin / "docs" / "guide.md").write_text("# Guide\n")
    subprocess.run([*git, "init", "-q", str(origin)], check=True)
    subprocess.run([*git, "-C", str(origin), "add", "."], check=True)
    subprocess.run([*git, "-C", str(origin), "commit", "-qm", "first"], check=True)
    clone = tmp_path / "clone"
    subprocess.run([*git, "clone", "-q", str(origin), str(clone)], check=True)
    marker = tmp_path / "hook-ran"
    hook = clone / ".git" / "hooks" / "post-merge"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    collection_create(path=clone, name="repo")
    collection_create(path=clone / "docs", name="docs")

    (origin / "new.md").write_text("# New\n")
    (origin / "docs" / "more.md").write_text("# More\n")
    subprocess.run([*git, "-C", str(origin), "add", "."], check=True)
    subprocess.run([*git, "-C", str(origin), "commit", "-qm", "second"], check=True)

    [refreshed] = collections_refresh(names=["docs"], pull=True, access=Access.local_user()).collections
    pulled, error = refreshed.pulled, refreshed.problem
    assert error is None and not pulled.ran and "not its top" in pulled.output
    assert not (clone / "new.md").exists() and not (clone / "docs" / "more.md").exists()

    [refreshed] = collections_refresh(names=["repo"], pull=True, access=Access.local_user()).collections
    pulled, error = refreshed.pulled, refreshed.problem
    assert error is None and pulled.ran and pulled.ok, pulled.output
    assert (clone / "new.md").exists()
    assert not marker.exists()


def test_a_folder_swapped_for_a_link_between_walk_and_read_is_not_read(notes, outside):
    (notes / "sub").mkdir()
    (notes / "sub" / "secret.md").write_text("# Harmless at walk time\n")
    (notes / "last.md").write_text("# Also harmless\n")
    collection = collection_create(path=notes, name="notes")
    found = dict(collection_files(collection, []))
    # After the walk, before the read: sub/ becomes a link out, last.md a link to the secret.
    (notes / "sub" / "secret.md").unlink()
    (notes / "sub").rmdir()
    (notes / "sub").symlink_to(outside)
    (notes / "last.md").unlink()
    (notes / "last.md").symlink_to(outside / "secret.md")

    with pytest.raises(OSError, match="points outside the collection"):
        collection_file_open(collection, found["sub/secret.md"])
    with pytest.raises(OSError, match="symbolic link"):
        collection_file_open(collection, found["last.md"])
    with collection_file_open(collection, found["welcome.md"]) as handle:
        assert handle.read().startswith(b"# Welcome")


def test_a_collection_folder_later_replaced_by_a_link_is_not_followed(tmp_path, outside):
    from pmd_site.watcher import watch_targets

    docs = tmp_path / "notes" / "repo" / "docs"
    docs.mkdir(parents=True)
    (docs / "note.md").write_text("# Note\n\nInside.\n")
    collection = collection_create(path=docs, name="docs")
    collection_index(collection)
    assert _paths(collection) == {"note.md"}
    assert [t.name for t in watch_targets()] == ["docs"]

    shutil.rmtree(docs)
    docs.symlink_to(outside)
    collection.refresh_from_db()
    report = collection_index(collection)

    assert report.errors == 1
    assert "reached through a symbolic link" in _problems(collection)["."]
    assert "secret.md" not in _paths(collection)
    assert not Document.objects.filter(content__body__contains=SECRET).exists()
    with pytest.raises(DocumentNotFound):
        document_resolve("pmd://docs/secret.md", access=Access.local_user())
    with pytest.raises(OSError, match="points outside the collection"):
        collection_file_open(collection, str(docs / "secret.md"))
    assert watch_targets() == []

    # A folder on the way (not the root itself) swapped for a link: refused the same way.
    docs.unlink()
    repo = tmp_path / "notes" / "repo"
    repo.rmdir()
    (outside / "docs").mkdir()
    (outside / "docs" / "secret2.md").write_text(f"# S2\n\n{SECRET}\n")
    repo.symlink_to(outside)
    report = collection_index(collection)
    assert report.errors == 1 and "reached through a symbolic link" in _problems(collection)["."]
    assert not Document.objects.filter(content__body__contains=SECRET).exists()


def test_existing_collection_inside_pmd_home_is_not_read_by_the_scanner(db):
    folder = django_settings.PMD_HOME / "notes-by-mistake"
    folder.mkdir()
    try:
        (folder / "leak.md").write_text(f"# Leak\n\n{SECRET}\n")
        # Stored before the rule existed: straight into the table, no service in between.
        collection = Collection.objects.create(name="home", root_path=str(folder))
        report = collection_index(collection)
    finally:
        shutil.rmtree(folder)
    assert _paths(collection) == set()
    assert report.errors == 1 and "PMD_HOME" in _problems(collection)["."]


def test_the_watcher_does_not_watch_a_refused_folder(db, notes):
    from pmd_site.watcher import watch_targets

    Collection.objects.create(name="proc", root_path="/proc")
    Collection.objects.create(name="notes", root_path=str(notes))
    assert [t.name for t in watch_targets()] == ["notes"]


# --- which folders may become collections ----------------------------------------------------


def test_no_face_may_add_pmd_home_a_folder_around_it_or_inside_it(db):
    home = django_settings.PMD_HOME
    (home / "inside").mkdir(exist_ok=True)
    try:
        for folder in (home, home.parent, home / "inside"):
            for roots in (None, [Path("/")], [folder]):
                with pytest.raises(CollectionPathRefused, match="PMD_HOME"):
                    collection_create(path=folder, name="x", allowed_roots=roots)
    finally:
        (home / "inside").rmdir()
    assert not Collection.objects.exists()


@pytest.mark.parametrize("folder", ["/", "/proc", "/proc/self", "/sys", "/dev"])
def test_no_face_may_add_the_file_system_root_or_a_pseudo_file_system(db, folder):
    if not Path(folder).is_dir():
        pytest.skip(f"{folder} does not exist here")
    for roots in (None, [Path("/")]):
        with pytest.raises(CollectionPathRefused):
            collection_create(path=folder, name="x", allowed_roots=roots)
    assert not Collection.objects.exists()


def test_web_api_and_admin_refuse_everything_without_collection_roots(settings, notes):
    settings.PMD_COLLECTION_ROOTS = []
    with pytest.raises(CollectionPathRefused, match="PMD_COLLECTION_ROOTS") as refused:
        collection_create(path=notes, name="notes", allowed_roots=settings.PMD_COLLECTION_ROOTS)
    assert "--" not in str(refused.value)

    api = _api_client(staff=True)
    response = api.post("/api/collections", {"path": str(notes), "name": "notes"}, content_type="application/json")
    assert response.status_code == 400 and "PMD_COLLECTION_ROOTS" in response.json()["message"]
    web = Client()
    web.force_login(get_user_model().objects.get(username="staffer"))
    page = web.post("/collections/add/", {"path": str(notes), "name": "notes"})
    assert page.status_code == 400 and "PMD_COLLECTION_ROOTS" in page.content.decode()
    assert not Collection.objects.exists()


def test_web_and_api_add_collections_only_under_collection_roots(settings, tmp_path, notes, outside):
    settings.PMD_COLLECTION_ROOTS = [notes.parent / "allowed", notes]
    api = _api_client(staff=True)
    refused = api.post("/api/collections", {"path": str(outside), "name": "out"}, content_type="application/json")
    assert refused.status_code == 400 and "PMD_COLLECTION_ROOTS" in refused.json()["message"]
    assert "--" not in refused.json()["message"]
    for path in ("/etc", "/root", "/"):
        assert api.post("/api/collections", {"path": path}, content_type="application/json").status_code == 400
    web = Client()
    web.force_login(get_user_model().objects.get(username="staffer"))
    page = web.post("/collections/add/", {"path": str(outside), "name": "out"})
    assert page.status_code == 400 and "PMD_COLLECTION_ROOTS" in page.content.decode()
    assert not Collection.objects.exists()

    (notes / "sub").mkdir()
    created = api.post(
        "/api/collections", {"path": str(notes), "name": "notes", "index": False}, content_type="application/json"
    )
    assert created.status_code == 201, created.content
    assert web.post("/collections/add/", {"path": str(notes / "sub"), "name": "sub"}).status_code == 302
    assert set(Collection.objects.values_list("name", flat=True)) == {"notes", "sub"}
    duplicate = api.post("/api/collections", {"path": str(notes), "name": "notes"}, content_type="application/json")
    assert duplicate.status_code == 409 and "--name" not in duplicate.json()["message"]


def test_admin_cannot_add_or_move_a_collection_outside_the_roots(settings, notes, outside):
    settings.PMD_COLLECTION_ROOTS = [notes]
    admin_user = make_user("root", password="correct horse battery", superuser=True)
    client = Client()
    client.force_login(admin_user)
    form = {
        "name": "etc",
        "root_path": "/etc",
        "mask": "**/*.md",
        "ignore_patterns": "[]",
        "text_search_config": "english",
        "visibility": "everyone",
    }
    page = client.post("/admin/indexing/collection/add/", form)
    assert page.status_code == 200 and "PMD_COLLECTION_ROOTS" in page.content.decode()
    assert not Collection.objects.exists()

    added = client.post("/admin/indexing/collection/add/", {**form, "name": "notes", "root_path": str(notes)})
    assert added.status_code == 302
    collection = Collection.objects.get(name="notes")
    for target in (str(outside), "/proc", str(django_settings.PMD_HOME)):
        moved = client.post(
            f"/admin/indexing/collection/{collection.pk}/change/", {**form, "name": "notes", "root_path": target}
        )
        assert moved.status_code == 200, target
    collection.refresh_from_db()
    assert collection.root_path == str(notes)


def test_cli_refuses_proc_but_is_not_limited_by_collection_roots(settings, run_cli, notes):
    settings.PMD_COLLECTION_ROOTS = []
    code, _, err = run_cli("collection", "add", "/proc", "--name", "proc", "--no-index")
    assert code != 0 and "pseudo file system" in err
    assert not Collection.objects.filter(name="proc").exists()
    code, _, err = run_cli("collection", "add", str(notes), "--name", "notes", "--no-index")
    assert code == 0, err
    assert Collection.objects.filter(name="notes").exists()


def test_pmd_up_allows_its_folders_for_the_web_ui(settings, tmp_path, notes):
    from pmd_site.cli.up import collection_roots_env

    settings.PMD_COLLECTION_ROOTS = [tmp_path / "configured"]
    value = collection_roots_env([str(notes), str(notes / ".." / "notes")])
    assert value.split(",") == [str(tmp_path / "configured"), str(notes.resolve())]


# --- folders and names of collections the caller does not see --------------------------------


@pytest.fixture
def hidden_world(settings, tmp_path):
    """Under the allowed folder: `hrvault` (private to olga) in team/hr, `handbook` (everyone) in
    handbook/; sam is staff without access to hrvault."""
    allowed = tmp_path / "allowed"
    hr = allowed / "team" / "hr"
    (hr / "pay").mkdir(parents=True)
    (hr / "pay" / "salaries.md").write_text(f"# Salaries\n\n{SECRET}\n")
    (allowed / "handbook").mkdir()
    (allowed / "free").mkdir()
    (allowed / "shortcut").symlink_to(hr / "pay")  # a link that leads into the hidden folder
    settings.PMD_COLLECTION_ROOTS = [allowed]
    olga = make_user("olga", password="pw-123-pw-123", staff=True)
    sam = make_user("sam", password="pw-123-pw-123", staff=True)
    collection_create(path=hr, name="hrvault", owner=olga, visibility=Collection.Visibility.PRIVATE)
    collection_create(path=allowed / "handbook", name="handbook")
    (tmp_path / "elsewhere").mkdir()
    return {"allowed": allowed, "hr": hr, "outside": tmp_path / "elsewhere", "olga": olga, "sam": sam}


def _api_as(user) -> Client:
    return api_client(user)


def _web_as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _normalized(response, *texts: str) -> tuple[int, str]:
    import re

    body = re.sub(r'(csrfmiddlewaretoken" value="|X-CSRFToken": ")[^"]+', r"\1", response.content.decode())
    for text in texts:
        body = body.replace(text, "TYPED")
    return response.status_code, body


def test_staff_cannot_add_a_hidden_collections_folder_nor_one_inside_or_around_it(hidden_world):
    w = hidden_world
    hr, allowed = w["hr"], w["allowed"]
    # The yardstick: a folder outside PMD_COLLECTION_ROOTS, which no one may add from these faces.
    never = str(w["outside"])
    hidden = [
        hr,
        hr / "pay",
        allowed / "team",
        hr / ".." / "hr",
        allowed / "shortcut",
        hr / "pay" / "salaries.md",
        hr / "no-such-folder",
        allowed / "no-such-folder",
    ]
    api, web, admin = _api_as(w["sam"]), _web_as(w["sam"]), _web_as(w["sam"])
    form = {"mask": "**/*.md", "ignore_patterns": "[]", "text_search_config": "english", "visibility": "everyone"}

    def api_answer(path):
        return _normalized(
            api.post("/api/collections", {"path": path, "name": "leak"}, content_type="application/json"), path
        )

    def web_answer(path):
        return _normalized(web.post("/collections/add/", {"path": path, "name": "leak"}), path)

    def admin_answer(path):
        return _normalized(
            admin.post("/admin/indexing/collection/add/", {**form, "name": "leak", "root_path": path}), path
        )

    for answer, status in ((api_answer, 400), (web_answer, 400), (admin_answer, 200)):
        yardstick = answer(never)
        assert yardstick[0] == status and "PMD_COLLECTION_ROOTS" in yardstick[1], answer
        for folder in hidden:
            assert answer(str(folder)) == yardstick, (answer.__name__, folder)
    assert set(Collection.objects.values_list("name", flat=True)) == {"hrvault", "handbook"}

    # Its owner sees it: a folder inside it is hers to add (a collection she sees is no secret to her).
    mine = _api_as(w["olga"]).post(
        "/api/collections", {"path": str(hr / "pay"), "name": "pay", "index": False}, content_type="application/json"
    )
    assert mine.status_code == 201, mine.content
    assert (
        api.post(
            "/api/collections",
            {"path": str(allowed / "free"), "name": "free", "index": False},
            content_type="application/json",
        ).status_code
        == 201
    )


def test_staff_cannot_move_a_collection_onto_a_hidden_collections_folder(hidden_world):
    w = hidden_world
    handbook = Collection.objects.get(name="handbook")
    form = {
        "name": "handbook",
        "mask": "**/*.md",
        "ignore_patterns": "[]",
        "text_search_config": "english",
        "visibility": "everyone",
    }
    admin = _web_as(w["sam"])
    never = _normalized(
        admin.post(f"/admin/indexing/collection/{handbook.pk}/change/", {**form, "root_path": str(w["outside"])}),
        str(w["outside"]),
    )
    assert never[0] == 200 and "PMD_COLLECTION_ROOTS" in never[1]
    for folder in (w["hr"], w["hr"] / "pay", w["allowed"] / "team", w["allowed"] / "shortcut"):
        moved = admin.post(f"/admin/indexing/collection/{handbook.pk}/change/", {**form, "root_path": str(folder)})
        assert _normalized(moved, str(folder)) == never, folder
    handbook.refresh_from_db()
    assert handbook.root_path == str(w["allowed"] / "handbook")


def test_a_hidden_collections_name_is_refused_in_the_words_of_a_visible_ones(hidden_world):
    w = hidden_world
    api, web = _api_as(w["sam"]), _web_as(w["sam"])
    free = str(w["allowed"] / "free")

    def add(name):
        response = api.post(
            "/api/collections", {"path": free, "name": name, "index": False}, content_type="application/json"
        )
        return response.status_code, response.json()["code"], response.json()["message"].replace(name, "NAME")

    assert (
        add("hrvault")
        == add("handbook")
        == (409, "collection_exists", "the collection name 'NAME' is not available: choose another")
    )
    for name in ("hrvault", "handbook"):  # (the page lists handbook: only the answer itself is compared)
        page = web.post("/collections/add/", {"path": free, "name": name})
        assert page.status_code == 400
        assert f"the collection name &#x27;{name}&#x27; is not available: choose another" in page.content.decode()

    api.post("/api/collections", {"path": free, "name": "mine", "index": False}, content_type="application/json")

    def rename(name):
        response = api.patch("/api/collections/mine", {"name": name}, content_type="application/json")
        return response.status_code, response.content.decode().replace(name, "NAME")

    assert rename("hrvault") == rename("handbook") and rename("handbook")[0] == 409
    mine = Collection.objects.get(name="mine")
    form = {
        "root_path": mine.root_path,
        "mask": mine.mask,
        "ignore_patterns": "[]",
        "text_search_config": "english",
        "visibility": "everyone",
    }
    admin = _web_as(w["sam"])
    renamed = {
        name: _normalized(admin.post(f"/admin/indexing/collection/{mine.pk}/change/", {**form, "name": name}), name)
        for name in ("hrvault", "handbook")
    }
    assert renamed["hrvault"] == renamed["handbook"] and renamed["hrvault"][0] == 200
    assert "not available" in renamed["hrvault"][1]
    assert set(Collection.objects.values_list("name", flat=True)) == {"hrvault", "handbook", "mine"}
