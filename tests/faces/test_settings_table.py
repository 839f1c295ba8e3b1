"""The one table of settings: .env.example is rendered from it, the index's configuration and the
settings' choice checks take it as it is."""

from __future__ import annotations

import pytest

from indexing.errors import ConfigError
from indexing.services.index_config import INDEX_SETTINGS, VECTOR_SETTINGS
from pmd_site.settings.table import SETTINGS, TABLE, read, render_env_example
from tests.support.paths import ROOT


def test_the_committed_env_example_is_the_rendered_table():
    """Otherwise: `python -m pmd_site.settings --write`."""
    assert (ROOT / ".env.example").read_text() == render_env_example()


def test_every_variable_is_in_the_table_once_with_a_known_kind_and_a_group():
    assert len(SETTINGS) == len(TABLE)
    for setting in TABLE:
        assert setting.kind in {"str", "bool", "int", "float", "list", "networks", "path"}, setting
        assert setting.group, setting
        assert not setting.choices or setting.default in (*setting.choices, None), setting


def test_the_index_keeps_the_settings_the_table_marks():
    assert list(INDEX_SETTINGS) == [
        "PMD_LLM_BACKEND",
        "OLLAMA_URL",
        "PMD_OPENAI_BASE_URL",
        "PMD_EMBED_MODEL",
        "PMD_GENERATE_MODEL",
        "PMD_RERANK_MODEL",
        "PMD_ANSWER_MODEL",
        "PMD_RERANK_URL",
        "PMD_CHUNK_TOKENS",
        "PMD_CHUNK_OVERLAP",
        "PMD_CHUNK_WINDOW",
        "PMD_EMBED_QUERY_PROMPT",
        "PMD_EMBED_DOC_PROMPT",
        "PMD_VECTOR_STORAGE",
    ]
    assert INDEX_SETTINGS["PMD_CHUNK_TOKENS"] is int and INDEX_SETTINGS["PMD_CHUNK_OVERLAP"] is float
    assert VECTOR_SETTINGS == {
        "PMD_LLM_BACKEND",
        "PMD_EMBED_MODEL",
        "PMD_CHUNK_TOKENS",
        "PMD_CHUNK_OVERLAP",
        "PMD_CHUNK_WINDOW",
        "PMD_EMBED_DOC_PROMPT",
    }


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("PMD_LOG_FORMAT", "xml", "PMD_LOG_FORMAT='xml': use plain or json"),
        ("PMD_PROFILE", " Tiny ", "PMD_PROFILE='tiny': use default or small"),
        ("PMD_WORKER_QUEUES", "gpu", "PMD_WORKER_QUEUES='gpu': use all, index or embed"),
        ("PMD_RERANK_API", "Cohere", "PMD_RERANK_API='cohere': use auto, chat, rerank or tei"),
        ("PMD_LOCAL_PRECISION", "int4", "PMD_LOCAL_PRECISION='int4': use int8 or fp32"),
        ("PMD_VECTOR_STORAGE", "float", "PMD_VECTOR_STORAGE='float': use vector or halfvec"),
        (
            "PMD_LDAP_GROUP_TYPE",
            "group",
            "PMD_LDAP_GROUP_TYPE='group': use groupOfNames, groupOfUniqueNames or posixGroup",
        ),
    ],
)
def test_a_value_outside_the_choices_is_refused_naming_them(monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as refused:
        read(name, "")
    assert str(refused.value) == message


def test_the_choices_are_read_as_before(monkeypatch):
    monkeypatch.setenv("PMD_WORKER_QUEUES", "  ")
    monkeypatch.setenv("PMD_VECTOR_STORAGE", " HalfVec ")
    monkeypatch.setenv("PMD_LLM_BACKEND", "elsewhere")  # refused where a client is made, not at start
    assert read("PMD_WORKER_QUEUES") == "all"
    assert read("PMD_VECTOR_STORAGE") == "halfvec"
    assert read("PMD_LLM_BACKEND") == "elsewhere"
