"""The in-process backend's default embedding model is multilingual (multilingual-e5-small), with its
prompts and window; an index embedded before keeps the model of its vectors."""

from importlib import import_module

import pytest
from django.apps import apps

from indexing.llm import embedding_prompts
from indexing.llm.local import DEFAULT_EMBED_MODEL, hub_name, model_window
from indexing.llm.prompts import model_is_english_only
from indexing.models import Chunk, Content, EmbeddingFingerprint, IndexSetting

keep_model = import_module("indexing.migrations.0015_index_keeps_its_embedding_model").keep_model


def test_the_default_local_model_is_multilingual_with_its_prefixes_and_window(settings, tmp_path):
    assert DEFAULT_EMBED_MODEL == "intfloat/multilingual-e5-small"
    assert settings.PMD_MODEL_DEFAULTS["local"]["PMD_EMBED_MODEL"] == DEFAULT_EMBED_MODEL
    assert not model_is_english_only(DEFAULT_EMBED_MODEL)
    prompts = embedding_prompts(DEFAULT_EMBED_MODEL)
    assert prompts.format_query("wie ändere ich den Besitzer") == "query: wie ändere ich den Besitzer"
    assert prompts.format_document("Text", title="Titel") == "passage: Text"
    assert model_window(DEFAULT_EMBED_MODEL, tmp_path) == 512  # before it is downloaded
    assert hub_name("all-minilm") == "sentence-transformers/all-MiniLM-L6-v2"  # still a name people use


def _vectors_of(model: str, backend: str):
    fingerprint = EmbeddingFingerprint.objects.create(key=f"k{len(model)}", model=model, dims=3, backend=backend)
    content = Content.objects.create(hash=f"{len(model):064d}", body="text", size=4)
    Chunk.objects.create(
        fingerprint=fingerprint, content=content, seq=0, char_start=0, char_end=4, embedding=[1.0, 0.0, 0.0]
    )


@pytest.mark.django_db
def test_an_index_embedded_before_keeps_the_model_of_its_vectors():
    _vectors_of("sentence-transformers/all-MiniLM-L6-v2", "local")
    keep_model(apps, None)
    kept = dict(IndexSetting.objects.values_list("name", "value"))
    assert kept == {"PMD_EMBED_MODEL": "sentence-transformers/all-MiniLM-L6-v2", "PMD_LLM_BACKEND": "local"}


@pytest.mark.django_db
def test_a_configured_or_unembedded_index_is_left_as_it_is():
    keep_model(apps, None)
    assert not IndexSetting.objects.exists()  # nothing embedded: the defaults apply
    IndexSetting.objects.create(name="PMD_EMBED_MODEL", value="nomic-embed-text")
    _vectors_of("all-minilm", "ollama")
    keep_model(apps, None)
    assert dict(IndexSetting.objects.values_list("name", "value")) == {"PMD_EMBED_MODEL": "nomic-embed-text"}
