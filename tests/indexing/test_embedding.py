"""Embedding the index: batches, idempotency, staleness, model switch, faults."""

from __future__ import annotations

import shutil

import pytest

from indexing.chunking import chunk_markdown
from indexing.errors import EmbeddingError, LLMBackendUnavailable, LLMBadResponse, LLMModelMissing
from indexing.models import Chunk, Content, ContentEmbedding, EmbeddingFingerprint, Job
from indexing.services.embedding import (
    chunk_params_from_settings,
    embed_pending,
    embedding_status,
    hnsw_index_exists,
    pending_contents,
)
from indexing.services.jobs import job_create
from indexing.services.scanning import collection_index

pytestmark = pytest.mark.django_db


def expected_chunks() -> int:
    params = chunk_params_from_settings()
    contents = Content.objects.filter(documents__active=True).distinct()
    return sum(len(chunk_markdown(c.body, params)) for c in contents)


def embedded_inputs(ollama) -> list[str]:
    return [text for r in ollama.requests_to("/api/embed") for text in r.body["input"]]


@pytest.fixture
def small_batches(settings):
    settings.PMD_EMBED_BATCH = 2
    settings.PMD_CHUNK_TOKENS = 40  # several chunks per fixture document
    return settings


def test_embeds_every_active_document_once(indexed_collection, ollama, small_batches):
    report = embed_pending()
    active_contents = Content.objects.filter(documents__active=True).distinct().count()
    assert report.contents == active_contents == report.pending_before
    assert report.chunks == expected_chunks() == Chunk.objects.count()
    assert ContentEmbedding.objects.count() == active_contents
    assert report.batches == len(ollama.requests_to("/api/embed"))
    assert all(len(r.body["input"]) <= 2 for r in ollama.requests_to("/api/embed"))
    fingerprint = EmbeddingFingerprint.objects.get()
    assert (fingerprint.model, fingerprint.dims) == ("embeddinggemma", 768)
    assert fingerprint.chunk_params["max_tokens"] == 40
    assert hnsw_index_exists(fingerprint) and report.index_built
    # documents are embedded with embeddinggemma's document prompt and their title
    assert any(t.startswith("title: Tuning PostgreSQL for search | text: ---") for t in embedded_inputs(ollama))
    # chunk rows point back into the body
    chunk = Chunk.objects.filter(content__documents__path="guides/postgres-tuning.md").order_by("seq").last()
    body = chunk.content.body
    assert body.count("\n", 0, chunk.char_start) + 1 == chunk.start_line
    assert len(chunk.embedding) == 768


def test_second_run_does_nothing(indexed_collection, ollama, small_batches):
    embed_pending()
    calls = len(ollama.requests_to("/api/embed"))
    chunks = Chunk.objects.count()
    report = embed_pending()
    assert (report.pending_before, report.chunks, report.contents) == (0, 0, 0)
    assert len(ollama.requests_to("/api/embed")) == calls, "no backend call when nothing is pending"
    assert Chunk.objects.count() == chunks


def test_a_changed_file_is_pending_and_unchanged_content_costs_nothing(
    indexed_collection, ollama, small_batches, corpus_dir
):
    embed_pending()
    before = len(embedded_inputs(ollama))
    (corpus_dir / "guides" / "identifiers.md").write_text("# Identifiers\n\nRenamed getUserById to fetchUser.\n")
    shutil.copy(corpus_dir / "README.md", corpus_dir / "README-copy.md")  # same content, new path
    collection_index(indexed_collection)
    fingerprint = EmbeddingFingerprint.objects.get()
    assert pending_contents(fingerprint).count() == 1
    report = embed_pending()
    assert report.contents == 1
    new_inputs = embedded_inputs(ollama)[before:]
    assert len(new_inputs) == 1 and "fetchUser" in new_inputs[0]


def test_a_failed_run_keeps_its_finished_batches_and_the_next_run_completes(indexed_collection, ollama, small_batches):
    def break_after_first(call, texts):
        if call == 1:
            ollama.fail_always = 500

    ollama.on_embed = break_after_first
    job = job_create(kind=Job.Kind.EMBED)
    with pytest.raises(LLMBadResponse):
        embed_pending(job=job)
    job.refresh_from_db()
    assert job.state == Job.State.FAILED
    kept = Chunk.objects.count()
    assert kept == 2, "the first batch was committed"

    ollama.on_embed = None
    ollama.fail_always = None
    before = len(embedded_inputs(ollama))
    report = embed_pending()
    assert Chunk.objects.count() == expected_chunks()
    assert report.reused_chunks <= kept
    assert len(embedded_inputs(ollama)) - before == expected_chunks() - kept, "stored chunks are not embedded again"


def test_force_re_embeds_everything(indexed_collection, ollama, small_batches):
    embed_pending()
    first = Chunk.objects.count()
    before = len(embedded_inputs(ollama))
    report = embed_pending(force=True)
    assert report.chunks == first == Chunk.objects.count()
    assert len(embedded_inputs(ollama)) - before == first


def test_model_switch_re_embeds_and_drops_the_old_vectors(indexed_collection, ollama, small_batches):
    embed_pending()
    old = EmbeddingFingerprint.objects.get()
    ollama.add_model("tiny-embed", dims=64, family="bert")
    small_batches.PMD_EMBED_MODEL = "tiny-embed"

    status = embedding_status()
    assert status["fingerprint"] is None and status["mismatch"]
    assert status["stale_fingerprints"][0]["model"] == "embeddinggemma"

    report = embed_pending()
    assert report.dims == 64 and report.dropped_fingerprints == ["embeddinggemma (768d)"]
    new = EmbeddingFingerprint.objects.get()
    assert new.model == "tiny-embed" and new.pk != old.pk
    assert {len(c.embedding) for c in Chunk.objects.all()} == {64}
    assert hnsw_index_exists(new) and not hnsw_index_exists(old)
    status = embedding_status()
    assert not status["mismatch"] and status["pending"] == 0 and not status["stale_fingerprints"]


def test_latest_tag_is_the_same_model(indexed_collection, ollama, small_batches):
    embed_pending()
    small_batches.PMD_EMBED_MODEL = "embeddinggemma:latest"
    assert embedding_status()["pending"] == 0
    assert embed_pending().chunks == 0


def test_chunk_size_change_is_a_new_fingerprint(indexed_collection, ollama, small_batches):
    embed_pending()
    small_batches.PMD_CHUNK_TOKENS = 500
    assert embedding_status()["fingerprint"] is None
    embed_pending()
    assert EmbeddingFingerprint.objects.get().chunk_params["max_tokens"] == 500
    assert Chunk.objects.count() == expected_chunks()


def test_wrong_dimension_from_the_model_is_refused(indexed_collection, ollama, small_batches):
    ollama.add_model("liar", dims=32, embed_dims=48)
    small_batches.PMD_EMBED_MODEL = "liar"
    with pytest.raises(EmbeddingError, match="returned 48-dimensional vectors but reported 32"):
        embed_pending()
    assert Chunk.objects.count() == 0


def test_missing_model_and_server_down_fail_the_job_clearly(indexed_collection, ollama, small_batches, settings):
    settings.PMD_EMBED_MODEL = "not-pulled"
    job = job_create(kind=Job.Kind.EMBED)
    with pytest.raises(LLMModelMissing):
        embed_pending(job=job)
    job.refresh_from_db()
    assert job.state == Job.State.FAILED and "ollama pull not-pulled" in job.message
    ollama.stop()
    settings.PMD_EMBED_MODEL = "embeddinggemma"
    with pytest.raises(LLMBackendUnavailable, match="Ollama is not reachable"):
        embed_pending()


def test_collection_scope(indexed_collection, ollama, small_batches, tmp_path):
    from indexing.services.collections import collection_create

    other_dir = tmp_path / "other"
    other_dir.mkdir()
    (other_dir / "only-here.md").write_text("# Only here\n\nA document about gardening tomatoes.\n")
    other = collection_create(path=other_dir, name="garden")
    collection_index(other)
    report = embed_pending(collections=["garden"])
    assert report.contents == 1
    fingerprint = EmbeddingFingerprint.objects.get()
    assert pending_contents(fingerprint, collections=["garden"]).count() == 0
    assert pending_contents(fingerprint).count() > 0
    status = embedding_status()
    assert status["embedded"] == 1 and status["pending"] == status["contents"] - 1


def test_progress_is_reported_to_the_job(indexed_collection, ollama, small_batches):
    seen = []
    job = job_create(kind=Job.Kind.EMBED)
    report = embed_pending(job=job, progress=lambda done, total, detail: seen.append((done, total)))
    job.refresh_from_db()
    assert job.state == Job.State.DONE and job.done == job.total == report.pending_before
    assert job.result["chunks"] == report.chunks
    assert seen[0] == (0, report.pending_before) and seen[-1] == (report.pending_before, report.pending_before)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
