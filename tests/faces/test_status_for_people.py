"""Status written for people, on the web page and in `pmd status` alike: values in words, one
source for where embedding stands, problems by kind with errors first and each kind counted,
badges that lead to the problems."""

from __future__ import annotations

import re
import time

import pytest

from indexing.access import Access
from indexing.models import FileProblem, Job
from indexing.services.collections import collection_create
from indexing.services.embedding.lock import run_lock_release, run_lock_try
from indexing.services.model_server import hybrid_without
from indexing.services.scanning import collection_index
from pmd_site.reports.readable import section_view, status_lines
from pmd_site.reports.status import status_report
from tests.support.factories import write_notes

pytestmark = pytest.mark.django_db
pytest_plugins = ["tests.support.ollama_fixtures"]

RAW = re.compile(r"[{}]|\b1[0-9]{9}\.\d|[0-9a-f]{16,}|[0-9a-f]{8}-[0-9a-f]{4}-")


def _words(view: dict) -> str:
    return "\n".join([*view["lines"], *(f"{k}: {v}" for k, v in view["scalars"])])


def test_every_value_is_in_words_without_ids_hashes_or_dicts():
    job = {
        "id": "5f0c3f4e-8d4b-4f57-9d7a-0c6c1b7c2a11",
        "state": "running",
        "done": 40,
        "total": 300,
        "percent": 13.3,
        "message": "9e107d9d372bb6826bd81d3542a419d6",
        "created_at": "2026-01-01T10:00:00+00:00",
    }
    embeddings = {
        "ok": True,
        "state": "running",
        "model": "all-minilm",
        "chunking": {"max_tokens": 250, "overlap": 0.15, "window": 55, "decay": 0.7, "tokenizer": "x"},
        "fingerprint": {
            "key": "c0ffee0123456789abcdef0123456789",
            "model": "all-minilm",
            "dims": 384,
            "chunking": {"max_tokens": 250, "overlap": 0.15},
            "created_at": "2026-01-01T09:00:00+00:00",
        },
        "job": job,
    }
    text = _words(section_view("embeddings", embeddings))
    assert "Chunks: chunks of up to 250 tokens, 38 overlapping" in text
    assert "Vectors: all-minilm, 384 dimensions, chunks of up to 250 tokens" in text
    assert re.search(r"Last embedding request: 40 of 300 \(13 %\), asked \d+ days? ago", text), text
    assert not RAW.search(text), text
    watcher = _words(section_view("watcher", {"ok": True, "last_change_at": time.time() - 90, "mode": "inotify"}))
    assert "Last change: 1 min ago" in watcher and not RAW.search(watcher), watcher


def test_semantic_search_is_not_said_to_work_when_it_cannot():
    models = {"embed": {"model": "m", "present": False}, "generate": None, "rerank": {"model": "r", "present": True}}
    assert hybrid_without(models, semantic=False).endswith("; keyword search is not affected")
    assert hybrid_without(models).endswith("; keyword and semantic search are not affected")


def test_while_embedding_runs_every_line_says_so(ollama, indexed_collection, staff_client, run_cli):
    queued = Job.objects.create(kind=Job.Kind.EMBED, collection=indexed_collection, message="c0ffee0123456789abcdef01")
    assert run_lock_try()  # as a running `pmd embed` holds it
    try:
        report = status_report(internals=True, access=Access.local_user())
        view = section_view("embeddings", report["embeddings"])
        text = _words(view)
        assert view["lines"][0] == "embedding now", view["lines"]
        assert "still to embed" in text and "run `pmd embed`" not in text and "queued" not in text
        page = staff_client.get("/collections/").content.decode()
        job = re.search(rf'<div class="job queued" id="job-{queued.pk}".*?</progress>', page, re.S)[0]
        assert "waiting for the embedding under way" in job and "c0ffee" not in job
        assert re.search(r"<progress aria-label=[^>]*></progress>", job)  # moving, not an empty bar
        code, out, _ = run_cli("status")
        assert code == 0 and "embedding now" in out and "run `pmd embed`" not in out
    finally:
        run_lock_release()
    # the run over, the request still queued: waiting for a worker, said the same way on every line
    lines = section_view("embeddings", status_report(internals=True, access=Access.local_user())["embeddings"])["lines"]
    assert lines[0] == "queued, no worker has taken it yet" and "when a worker takes the request" in lines[-1]


def test_a_running_embedding_job_reads_as_words_without_its_text_hash(indexed_collection, staff_client):
    """The collections page's job line: what the job does and how far it is, in words."""
    running = Job.objects.create(
        kind=Job.Kind.EMBED,
        collection=indexed_collection,
        state=Job.State.RUNNING,
        done=70,
        total=222,
        message="53b28ccbe5cd",  # the first characters of the text being embedded
    )
    page = staff_client.get("/collections/").content.decode()
    job = re.search(rf'<div class="job running" id="job-{running.pk}".*?</progress>', page, re.S)[0]
    line = re.search(r'<div class="job-line.*?</div>', job, re.S)[0]
    line = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", line)).strip()
    assert line == "Embedding: 70 of 222 notes", line
    assert "53b28ccbe5cd" not in job


@pytest.fixture
def links_and_an_error(tmp_path):
    """A vault with 30 unresolved links, and one file its last scan could not convert."""
    folder = write_notes(
        tmp_path / "vault",
        {f"note-{i:02}.md": f"# Note {i}\n\nSee [[Missing {i}]].\n" for i in range(30)},
    )
    collection = collection_create(path=folder, name="vault")
    collection_index(collection)
    FileProblem.objects.create(
        collection=collection, path="zz-report.pdf", severity="error", message="not a PDF file: skipped"
    )
    return collection


def test_collection_show_writes_times_switches_and_states_in_words(links_and_an_error, run_cli):
    code, out, err = run_cli("collection", "show", "vault")
    assert code == 0, err
    assert re.search(r"^last indexed: (now|\d+ s ago)$", out, re.M), out
    assert "\ntransclude: off\n" in out and "\nnotes: 30\n" in out
    assert re.search(r"^history: (not read yet|not in a git repository)", out, re.M), out
    assert "+00:00" not in out and "False" not in out and "not_" not in out


def test_problems_are_listed_by_kind_errors_first_and_counted(links_and_an_error, staff_client, run_cli):
    code, out, _ = run_cli("collection", "show", "vault")
    assert code == 0
    assert "problems: 1 not indexed, 30 unresolved links" in out
    lines = out.splitlines()
    first_link = next(i for i, line in enumerate(lines) if "unresolved link" in line and "note-" in line)
    assert lines.index("error zz-report.pdf: not a PDF file: skipped") < first_link
    report = status_report(internals=True, access=Access.local_user())
    view = section_view("problems", report["problems"])
    assert view["lines"][0] == "1 not indexed, 30 unresolved links"
    rows = view["tables"][0]["rows"]
    assert rows[0][0] == "not indexed" and rows[0][1] == "pmd://vault/zz-report.pdf"
    assert [r[0] for r in rows[1:]] == ["unresolved link"] * 10  # ten of each kind, the count says the rest
    status_text = "\n".join(line for _, line in status_lines(report))
    assert status_text.index("not a PDF file") < status_text.index("Missing 0")
    page = staff_client.get("/status/").content.decode()
    assert 'data-section="problems" id="problems"' in page
    collections = staff_client.get("/collections/").content.decode()
    badge = re.search(r'<a class="badge warn" href="([^"]+)"[^>]*>31<', collections)
    assert badge and badge[1] == "/status/#problems"
