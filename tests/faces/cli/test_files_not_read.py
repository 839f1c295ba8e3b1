"""Nothing skipped in silence: every scan says which files it did not read and how to include them;
a collection's formats change from every face and re-index it; nested collections leave no file
indexed nowhere; a folder is one collection."""

from __future__ import annotations

import json
import shutil

import pytest

from indexing.access import Access
from indexing.models import Document
from tests.support.factories import api_client, make_user
from tests.support.paths import FIXTURES

FORMATS = FIXTURES / "formats"


@pytest.fixture
def mixed_folder(tmp_path):
    """Two notes, two PDFs, an HTML page and a DOCX, and a file of a format pmd does not read."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nkiwi\n")
    (folder / "sub").mkdir()
    (folder / "sub" / "b.md").write_text("# B\n\nmango\n")
    shutil.copy(FORMATS / "report.pdf", folder / "report.pdf")
    shutil.copy(FORMATS / "long.pdf", folder / "sub" / "long.pdf")
    shutil.copy(FORMATS / "guide.html", folder / "guide.html")
    shutil.copy(FORMATS / "notes.docx", folder / "sub" / "notes.docx")
    (folder / "photo.jpg").write_bytes(b"\xff\xd8\xff")
    return folder


def _paths(name: str) -> set[str]:
    return set(Document.objects.filter(collection__name=name, active=True).values_list("path", flat=True))


def test_collection_add_and_update_say_which_files_they_did_not_read(db, run_cli, mixed_folder):
    code, out, err = run_cli("collection", "add", str(mixed_folder), "--name", "notes")
    assert code == 0, err
    assert "2 added" in out
    assert (
        "4 files not read: 2 PDF, 1 DOCX, 1 HTML: include them with "
        "`pmd collection set notes --formats md,docx,html,pdf`"
    ) in err
    code, out, err = run_cli("update", "--json")
    [report] = json.loads(out)
    assert report["not_read"] == {"pdf": 2, "html": 1, "docx": 1}
    assert report["formats_to_include"] == ["md", "docx", "html", "pdf"]


def test_collection_set_formats_reads_them_and_says_nothing_is_left(db, run_cli, mixed_folder):
    assert run_cli("collection", "add", str(mixed_folder), "--name", "notes")[0] == 0
    code, out, err = run_cli("collection", "set", "notes", "--formats", "md,pdf,html,docx")
    assert code == 0, err
    assert "reads **/*.{md,pdf,html,htm,xhtml,docx}" in out and "4 added" in out
    assert "not read" not in err
    assert _paths("notes") == {"a.md", "sub/b.md", "report.pdf", "sub/long.pdf", "guide.html", "sub/notes.docx"}
    code, out, err = run_cli("collection", "set", "notes", "--mask", "**/*.md")
    assert code == 0 and "4 removed" in out and "4 files not read" in err
    code, _, err = run_cli("collection", "set", "notes", "--formats", "pdf", "--mask", "**/*.md")
    assert code == 1 and "not both" in err


def test_the_api_patch_changes_a_collections_formats_and_reindexes_it(db, mixed_folder, eager_tasks, settings):
    from indexing.services.refresh import collection_add

    settings.PMD_COLLECTION_ROOTS = [mixed_folder.parent]
    collection_add(path=mixed_folder, name="notes", access=Access.local_user())
    client = api_client(make_user("root", staff=True))
    response = client.patch("/api/collections/notes", {"formats": ["pdf"]}, content_type="application/json")
    assert response.status_code == 200, response.content
    assert response.json()["mask"] == "**/*.{md,pdf}"
    assert _paths("notes") == {"a.md", "sub/b.md", "report.pdf", "sub/long.pdf"}
    refused = client.patch("/api/collections/notes", {"formats": ["psd"]}, content_type="application/json")
    assert refused.status_code == 422 and "unknown format 'psd'" in refused.json()["message"]


def test_a_markdown_only_collection_inside_one_that_reads_office_files_leaves_them_to_it(db, mixed_folder):
    from indexing.services.refresh import collection_add

    local = Access.local_user()
    collection_add(path=mixed_folder, name="outer", formats=["pdf", "docx", "html"], access=local)
    assert "sub/notes.docx" in _paths("outer") and "sub/b.md" in _paths("outer")
    added = collection_add(path=mixed_folder / "sub", name="inner", access=local)
    assert added.inside == ["outer"]
    assert _paths("inner") == {"b.md"}
    assert _paths("outer") == {"a.md", "report.pdf", "guide.html", "sub/long.pdf", "sub/notes.docx"}
    assert added.refreshed.report.not_read == {}  # its PDF and DOCX are read by the collection around it


def test_the_same_folder_added_twice_is_refused_naming_the_collection_that_has_it(db, run_cli, mixed_folder):
    assert run_cli("collection", "add", str(mixed_folder), "--name", "notes")[0] == 0
    code, _, err = run_cli("collection", "add", str(mixed_folder) + "/", "--name", "again")
    assert code == 1
    assert f"folder {mixed_folder} is already collection 'notes'" in err and "pmd update -c notes" in err
