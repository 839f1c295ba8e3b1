"""Adding a collection is one operation, whichever face asks: the CLI, the JSON API, the web UI
and `pmd up`'s folders all end with the same side effects: the documents indexed, an index
record, and an embedding request that ran (eager tasks, the Ollama test server)."""

from __future__ import annotations

import shutil

import pytest
from django.test import Client
from rich.console import Console

from indexing.models import Collection, EmbeddingFingerprint, Job
from indexing.services.embedding import pending_contents
from pmd_site.cli.up import _add_folders
from tests.support.factories import api_client


def _effects(name: str) -> dict:
    """What adding a collection left behind, in a face-independent shape."""
    collection = Collection.objects.get(name=name)
    embed_jobs = Job.objects.filter(kind=Job.Kind.EMBED)
    fingerprint = EmbeddingFingerprint.objects.get()
    return {
        "documents": collection.documents.filter(active=True).count(),
        "indexed": collection.last_indexed_at is not None,
        "embedding_requested": embed_jobs.exists(),
        "embedding_done": not embed_jobs.exclude(state=Job.State.DONE).exists(),
        "pending": pending_contents(fingerprint, collections=[name]).count(),
    }


def _fresh() -> None:
    """Forget earlier requests so each face is judged by its own."""
    Job.objects.all().delete()


@pytest.mark.django_db
def test_every_face_adds_a_collection_with_the_same_side_effects(
    corpus_dir, tmp_path, staff, run_cli, eager_tasks, ollama, settings
):
    settings.PMD_COLLECTION_ROOTS = [tmp_path]
    folders = {}
    for face in ("cli", "api", "web", "up"):
        folders[face] = tmp_path / f"notes-{face}"
        shutil.copytree(corpus_dir, folders[face])
        (folders[face] / "only-here.md").write_text(f"# Only in {face}\n\nContent no other collection has: {face}.\n")

    effects = {}

    code, out, err = run_cli("collection", "add", str(folders["cli"]), "--name", "cli")
    assert code == 0, err
    effects["cli"] = _effects("cli")
    _fresh()

    api = api_client(staff)
    response = api.post(
        "/api/collections", {"path": str(folders["api"]), "name": "api"}, content_type="application/json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["job"]["state"] == "done"
    effects["api"] = _effects("api")
    _fresh()

    browser = Client()
    browser.force_login(staff)
    response = browser.post("/collections/add/", {"path": str(folders["web"]), "name": "web", "mask": ""})
    assert response.status_code == 302
    effects["web"] = _effects("web")
    _fresh()

    assert _add_folders([str(folders["up"])], Console(quiet=True)) == ["notes-up"]
    effects["up"] = _effects("notes-up")

    expected = {"documents": 7, "indexed": True, "embedding_requested": True, "embedding_done": True, "pending": 0}
    assert effects == {face: expected for face in ("cli", "api", "web", "up")}


@pytest.mark.django_db
def test_adding_in_the_admin_has_the_same_side_effects_as_the_web_ui(
    corpus_dir, tmp_path, staff, eager_tasks, ollama, settings, django_capture_on_commit_callbacks
):
    settings.PMD_COLLECTION_ROOTS = [tmp_path]
    folders = {}
    for face in ("web", "admin"):
        folders[face] = tmp_path / f"notes-{face}"
        shutil.copytree(corpus_dir, folders[face])
        (folders[face] / "only-here.md").write_text(f"# Only in {face}\n\nContent no other collection has: {face}.\n")
    staff.is_superuser = True
    staff.save()
    browser = Client()
    browser.force_login(staff)

    effects = {}
    response = browser.post("/collections/add/", {"path": str(folders["web"]), "name": "web", "mask": ""})
    assert response.status_code == 302
    effects["web"] = _effects("web")
    _fresh()

    form = {
        "name": "admin",
        "root_path": str(folders["admin"]),
        "mask": "**/*.md",
        "ignore_patterns": "[]",
        "text_search_config": "english",
        "visibility": "everyone",
    }
    with django_capture_on_commit_callbacks(execute=True) as started:
        response = browser.post("/admin/indexing/collection/add/", form)
    assert response.status_code == 302, response.content
    assert len(started) == 1  # the index job, asked for once the admin's transaction commits
    effects["admin"] = _effects("admin")
    index_job = Job.objects.get(kind=Job.Kind.INDEX)
    assert (index_job.collection.name, index_job.created_by, index_job.state) == ("admin", staff, Job.State.DONE)

    expected = {"documents": 7, "indexed": True, "embedding_requested": True, "embedding_done": True, "pending": 0}
    assert effects == {"web": expected, "admin": expected}
