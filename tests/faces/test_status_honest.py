"""Status tells the truth on every face: the model server the index uses is up or
down and why, embedding is running / waiting (why, next check) / done per collection and kind, and
nothing that is down shows green. `pmd embed` with the server down fails in seconds with the reason."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from indexing.models import Job

pytest_plugins = ["tests.support.ollama_fixtures"]


@pytest.fixture
def waiting_job(db):
    """An embedding request parked while the model server is away (as embedding_queue leaves it)."""
    next_check = timezone.now() + timedelta(seconds=90)
    return Job.objects.create(
        kind=Job.Kind.EMBED,
        state=Job.State.QUEUED,
        message="waiting for the LLM backend: Ollama is not reachable at X",
        result={
            "waiting": {
                "collections": None,
                "force": False,
                "since": timezone.now().isoformat(),
                "checks": 2,
                "next_check_at": next_check.isoformat(),
            }
        },
    )


def _report(access=None):
    from indexing.access import Access
    from pmd_site.reports.status import status_report

    return status_report(internals=True, access=access or Access.local_user())


@pytest.mark.django_db
def test_model_server_down_is_red_in_every_section_that_needs_it(ollama_down, indexed_collection):
    report = _report()
    models, embeddings = report["models"], report["embeddings"]
    assert models["ok"] is False and models["reachable"] is False
    assert ollama_down in models["error"] and "not reachable" in models["error"]
    assert "OLLAMA_URL" in models["advice"]  # what to do, in the backend's own setting
    assert embeddings["ok"] is False  # no green light for embeddings while nothing can embed
    assert embeddings["state"] == "waiting" and "not reachable" in embeddings["reason"]


@pytest.mark.django_db
def test_model_server_up_is_green_and_says_what_hybrid_runs_without(ollama, settings, indexed_collection):
    settings.PMD_RERANK_MODEL = "dengcao/Qwen3-Reranker-0.6B:Q8_0"  # not on the test server
    settings.PMD_GENERATE_MODEL = "qwen3:0.6b"
    report = _report()
    assert report["models"]["ok"] is True and report["models"]["reachable"] is True
    assert report["models"]["models"]["embed"] == {"model": "embeddinggemma", "present": True}
    hybrid = report["models"]["hybrid"]
    assert "without re-ranking" in hybrid and "Qwen3-Reranker" in hybrid and "query expansion" not in hybrid


@pytest.mark.django_db
def test_hybrid_names_a_model_a_query_found_missing(ollama, settings, indexed_collection):
    from search.pipeline.absent import forget_absent, remember_absent

    settings.PMD_RERANK_MODEL = ""
    remember_absent("expansion", "qwen3:0.6b", "qwen3:0.6b answers 404 on /api/generate")
    try:
        hybrid = _report()["models"]["hybrid"]
    finally:
        forget_absent()
    assert "without query expansion (qwen3:0.6b answers 404" in hybrid and "without re-ranking (no model" in hybrid


@pytest.mark.django_db
def test_waiting_embedding_says_why_and_when_it_checks_again(ollama_down, indexed_collection, waiting_job):
    embeddings = _report()["embeddings"]
    assert embeddings["state"] == "waiting" and embeddings["ok"] is False
    assert embeddings["reason"] == "Ollama is not reachable at X"
    assert embeddings["next_check_at"] == waiting_job.result["waiting"]["next_check_at"]
    assert embeddings["checks"] == 2


@pytest.mark.django_db
def test_progress_per_collection_and_kind(ollama, indexed_collection):
    from indexing.services.embedding import embed_pending

    before = _report()["embeddings"]
    row = next(r for r in before["progress"] if r["name"] == "notes")
    assert row["notes"] > 0 and row["notes_embedded"] == 0 and before["state"] == "pending"
    embed_pending()
    after = _report()["embeddings"]
    row = next(r for r in after["progress"] if r["name"] == "notes")
    assert row["notes_embedded"] == row["notes"] and after["state"] == "done" and after["ok"] is True


@pytest.mark.django_db
def test_cli_status_says_down_in_words(ollama_down, indexed_collection, run_cli):
    code, out, _ = run_cli("status")
    assert code == 0
    models = out[out.index("Model server: problem") :]
    assert "down: Ollama is not reachable" in models and "what to do:" in models


@pytest.mark.django_db
def test_member_sees_down_without_the_address(ollama_down, indexed_collection, member):
    from indexing.access import Access

    seen = _report(Access.for_user(member))
    client = Client()
    client.force_login(member)
    api = client.get("/api/status", {"section": ["models", "embeddings"]}).json()
    assert api["models"]["ok"] is False and api["models"]["reachable"] is False and "url" not in api["models"]
    assert api["embeddings"]["ok"] is False and ollama_down not in str(api)
    page = client.get("/status/").content.decode()
    assert '<section class="card status bad" data-section="models">' in page and ollama_down not in page
    assert '<section class="card status bad" data-section="embeddings">' in page
    assert seen["models"]["ok"] is False


@pytest.mark.django_db
def test_web_status_page_is_written_for_people(ollama_down, indexed_collection, staff_client, waiting_job):
    html = staff_client.get("/status/").content.decode()
    assert "Model server" in html and "Embeddings" in html and "Task queue" in html
    assert "waiting for the model server" in html and "next check in 1 min" in html
    shown = re.sub(r"<details.*?</details>", "", html.split("</h1>")[1], flags=re.S)  # raw values aside
    assert "last_indexed_at" not in shown and "Last indexed" in shown  # labels, not keys
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:", shown)  # relative times, not ISO stamps
    assert "'model':" not in shown  # no Python dict for the fingerprint
    assert '<details class="raw"><summary>Raw values</summary>' in html
    assert "Notes with vectors" in html


@pytest.mark.django_db
def test_embed_with_the_server_down_fails_in_seconds_with_reason(ollama_down, indexed_collection, run_cli):
    started = time.monotonic()
    code, out, err = run_cli("embed")
    assert time.monotonic() - started < 10
    assert code != 0
    assert "Ollama is not reachable at" in err and "OLLAMA_URL" in err
    assert not Job.objects.filter(kind=Job.Kind.EMBED).exists()  # nothing queued to wait in silence


@pytest.mark.django_db
def test_embed_no_wait_with_the_server_down_queues_and_says_why(ollama_down, indexed_collection, run_cli, monkeypatch):
    from indexing.services import background
    from indexing.services.jobs import job_create

    # A worker took it (the queue is another test's business).
    monkeypatch.setattr(
        background, "embedding_request_here", lambda **kwargs: (job_create(kind=Job.Kind.EMBED, message="queued"), True)
    )
    code, out, err = run_cli("embed", "--no-wait")
    assert code == 0, err
    assert "not reachable" in err and "(queued: it runs once the server answers)" in err
    assert out == "embedding queued; `pmd status` follows it, and the web's Collections page\n"  # no job id


@pytest.mark.django_db
def test_follow_stops_when_the_request_starts_waiting(indexed_collection, waiting_job):
    from indexing.errors import LLMBackendUnavailable
    from pmd_site.cli.embed import _follow

    with pytest.raises(LLMBackendUnavailable, match="Ollama is not reachable at X; the request stays queued"):
        _follow(waiting_job, json_output=True)


@pytest.mark.django_db
def test_run_embedding_in_the_web_says_why_it_cannot_run(ollama_down, indexed_collection, staff_client, monkeypatch):
    from indexing.services.jobs import job_create
    from pmd_site.web.views import collections

    # Queued, as with a worker (no thread left running after the test).
    monkeypatch.setattr(
        collections, "embedding_request", lambda **kwargs: job_create(kind=Job.Kind.EMBED, message="queued")
    )
    page = staff_client.get("/", {"q": "postgres", "mode": "semantic"}).content.decode()
    assert "Run embedding" in page and "Embedding cannot run now: Ollama is not reachable" in page
    answer = staff_client.post("/collections/embed/", follow=True).content.decode()
    assert "Embedding is queued but cannot run now: Ollama is not reachable" in answer


@pytest.mark.django_db
def test_no_advice_to_run_embed_while_the_server_is_down(ollama_down, indexed_collection):
    embeddings = _report()["embeddings"]
    assert "the model server must answer first" in embeddings["hint"]
    assert "the model server cannot embed" in embeddings["error"]


# --- the index's configuration from the web (staff) ---------------------------------------------


@pytest.mark.django_db
def test_staff_change_the_index_configuration_on_the_status_page(
    staff_client, member_client, indexed_collection, ollama, settings
):
    from indexing.models import IndexSetting
    from indexing.services.embedding import embed_pending

    page = staff_client.get("/status/").content.decode()
    assert 'id="index-config"' in page and "PMD_GENERATE_MODEL" in page
    assert 'id="index-config"' not in member_client.get("/status/").content.decode()
    assert member_client.post("/status/config/", {"name": "PMD_GENERATE_MODEL", "value": "x"}).status_code in {302, 403}
    assert not IndexSetting.objects.filter(name="PMD_GENERATE_MODEL").exists()

    done = staff_client.post("/status/config/", {"name": "PMD_GENERATE_MODEL", "value": "qwen3:0.6b"}, follow=True)
    assert "PMD_GENERATE_MODEL is now qwen3:0.6b for every process" in done.content.decode()
    assert IndexSetting.objects.get(name="PMD_GENERATE_MODEL").value == "qwen3:0.6b"

    bad = staff_client.post("/status/config/", {"name": "PMD_CHUNK_TOKENS", "value": "many"}, follow=True)
    assert "expected a whole number" in bad.content.decode()

    embed_pending()  # vectors exist: another embedding model replaces them, so it asks first
    asked = staff_client.post("/status/config/", {"name": "PMD_EMBED_MODEL", "value": "all-minilm"})
    assert asked.status_code == 409
    text = asked.content.decode()
    assert "Replace the vectors" in text and "every note and commit is embedded again" in text and "--yes" not in text
    assert not IndexSetting.objects.filter(name="PMD_EMBED_MODEL", value="all-minilm").exists()
    staff_client.post("/status/config/", {"name": "PMD_EMBED_MODEL", "value": "all-minilm", "replace": "yes"})
    assert IndexSetting.objects.get(name="PMD_EMBED_MODEL").value == "all-minilm"


@pytest.mark.django_db
def test_admin_jobs_list_keeps_the_message_readable(indexed_collection):
    from django.contrib.auth import get_user_model

    Job.objects.create(kind=Job.Kind.EMBED, message="waiting for the LLM backend: " + "x" * 400)
    boss = get_user_model().objects.create_superuser("boss", password="correct horse battery")
    client = Client()
    client.force_login(boss)
    html = client.get("/admin/indexing/job/").content.decode()
    assert 'class="job-message"' in html and "pmd/admin.css" in html
    assert "x" * 400 not in html.split('title="')[0] and "…</span>" in html


@pytest.mark.django_db
def test_cli_status_names_the_models_without_python_dicts(ollama, settings, indexed_collection, run_cli):
    settings.PMD_RERANK_MODEL = "absent-reranker"
    code, out, _ = run_cli("status")
    assert "embed: embeddinggemma; " in out and "rerank: absent-reranker (missing)" in out and "{'model'" not in out
