"""One configuration per index: every process uses the index's backend, models and
chunking whatever environment started it; an environment variable wins for its own process with a
warning naming both values; replacing the vectors is an explicit, confirmed command."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from indexing.services.index_config import INDEX_SETTINGS, index_config_apply, index_config_set
from tests.support.paths import ROOT


@pytest.fixture
def minilm_index(indexed_collection, ollama, settings, run_cli):
    """`pmd up` was started with PMD_EMBED_MODEL=all-minilm: the index keeps it, and is embedded with it."""
    ollama.add_model("all-minilm", dims=384)
    ollama.add_model("nomic-embed-text", dims=768)
    index_config_set(values={"PMD_EMBED_MODEL": "all-minilm", "OLLAMA_URL": ollama.url, "PMD_LLM_BACKEND": "ollama"})
    code, out, err = run_cli("embed")
    assert code == 0, err
    return settings


@pytest.mark.django_db
def test_a_process_without_the_variables_uses_the_index_configuration(minilm_index, run_cli):
    minilm_index.PMD_EMBED_MODEL = "embeddinggemma"  # another shell: the default
    assert index_config_apply(environ={}) == []
    assert minilm_index.PMD_EMBED_MODEL == "all-minilm"
    code, out, err = run_cli("vsearch", "deploy")
    assert code == 0, err
    code, out, err = run_cli("status", "--json")
    embeddings = json.loads(out)["embeddings"]
    assert embeddings["model"] == "all-minilm" and not embeddings["mismatch"] and embeddings["pending"] == 0


@pytest.mark.django_db
def test_an_environment_that_disagrees_wins_for_its_process_with_a_warning_and_no_advice_to_re_embed(
    minilm_index, run_cli, monkeypatch
):
    minilm_index.PMD_EMBED_MODEL = "embeddinggemma"
    monkeypatch.setenv("PMD_EMBED_MODEL", "embeddinggemma")  # this process's environment
    [warning] = index_config_apply()
    assert "PMD_EMBED_MODEL=embeddinggemma" in warning and "PMD_EMBED_MODEL=all-minilm" in warning
    code, out, err = run_cli("vsearch", "deploy")
    assert code == 1
    assert "all-minilm" in err and "PMD_EMBED_MODEL=embeddinggemma" in err
    assert "pmd embed" not in err and "need embedding again" not in err
    code, out, err = run_cli("embed")  # would replace the index's vectors: refused without --yes
    assert code == 1 and "replaces the index's vectors of all-minilm" in err and "--yes" in err


@pytest.mark.django_db
def test_changing_the_model_says_what_it_replaces_and_needs_yes(minilm_index, run_cli, eager_tasks):
    code, out, err = run_cli("config", "set", "PMD_EMBED_MODEL=nomic-embed-text")
    assert code == 1 and "all-minilm" in err and "--yes" in err
    assert minilm_index.PMD_EMBED_MODEL == "all-minilm"
    code, out, err = run_cli("config", "set", "PMD_OLLAMA_NOPE=1")
    assert code == 1 and "not a setting the index keeps" in err
    code, out, err = run_cli("config", "set", "PMD_EMBED_MODEL=nomic-embed-text", "--yes")
    assert code == 0, err
    assert "all-minilm → nomic-embed-text" in out
    assert "embedding again: queued; `pmd status` follows it" in out and "job" not in out  # no id for people
    code, out, err = run_cli("status", "--json")
    embeddings = json.loads(out)["embeddings"]
    assert embeddings["model"] == "nomic-embed-text" and embeddings["pending"] == 0  # embedded again, eagerly
    assert embeddings["stale_fingerprints"] == []  # the old vectors went once the new ones covered the index


@pytest.mark.django_db(transaction=True)
def test_a_second_process_with_another_environment_reads_the_index_configuration(database_url, ollama):
    index_config_set(values={"PMD_EMBED_MODEL": "all-minilm", "OLLAMA_URL": ollama.url})
    base = {k: v for k, v in os.environ.items() if k not in INDEX_SETTINGS}
    base.update(DATABASE_URL=database_url, PMD_LOG_LEVEL="WARNING")

    def show(**env):
        done = subprocess.run(
            [sys.executable, "-m", "pmd_site.cli", "config", "show", "--json"],
            cwd=ROOT,
            env={**base, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return {row["name"]: row for row in json.loads(done.stdout)}, done.stderr

    rows, err = show()
    assert rows["PMD_EMBED_MODEL"]["value"] == "all-minilm" and rows["PMD_EMBED_MODEL"]["source"] == "index"
    assert rows["OLLAMA_URL"]["value"] == ollama.url
    rows, err = show(PMD_EMBED_MODEL="embeddinggemma")
    assert rows["PMD_EMBED_MODEL"]["value"] == "embeddinggemma" and rows["PMD_EMBED_MODEL"]["mismatch"]
    assert "PMD_EMBED_MODEL=all-minilm" in err and "PMD_EMBED_MODEL=embeddinggemma" in err


@pytest.mark.django_db
def test_a_first_pmd_up_that_chose_a_backend_stores_that_backends_models(settings):
    """`pmd up` without Ollama picks the in-process backend and keeps all its default models, the
    answer model among them (an unknown name here stopped `pmd up` before it served)."""
    from indexing.services.index_config import index_config_get
    from pmd_site.cli.up import _index_config_from_up

    settings.PMD_LLM_BACKEND = "ollama"  # what the index's configuration sets below is undone after the test
    _index_config_from_up({}, "local", console=None)
    stored = index_config_get()
    assert stored["PMD_LLM_BACKEND"] == "local"
    for name, value in settings.PMD_MODEL_DEFAULTS["local"].items():
        assert stored[name] == value


@pytest.mark.django_db
def test_pmd_up_names_only_the_environment_values_that_differ_from_the_index(minilm_index, monkeypatch, capsys):
    """The index keeps all-minilm and 250-token chunks a person set; `pmd up` with the same model and
    another chunk size names the chunk size as not used, never the model whose value already matches."""
    import io

    from rich.console import Console

    from indexing.services.index_config import index_config_get
    from pmd_site.cli.up import _index_config_from_up

    index_config_set(values={"PMD_CHUNK_TOKENS": "250"}, replace_vectors=True)
    monkeypatch.setenv("PMD_EMBED_MODEL", "all-minilm")
    monkeypatch.setenv("PMD_CHUNK_TOKENS", "200")
    env = {"PMD_EMBED_MODEL": "all-minilm", "PMD_CHUNK_TOKENS": "200"}
    _index_config_from_up(env, None, Console(file=io.StringIO()))
    err = capsys.readouterr().err
    assert "PMD_CHUNK_TOKENS from this environment not used" in err
    assert "PMD_EMBED_MODEL" not in err.split("from this environment not used")[0]
    assert env == {"PMD_EMBED_MODEL": "all-minilm"}  # the services start with the index's chunk size
    assert index_config_get()["PMD_CHUNK_TOKENS"] == "250"


# --- where a setting comes from: chosen automatically, then chosen again ----------------------------


def _start_pmd_up(monkeypatch, settings, **environ) -> tuple[str | None, str, str]:
    """What `pmd up` does with the index's configuration in an environment holding `environ` (and
    no other index setting): the backend it chooses, its summary line, and what it printed."""
    import io

    from rich.console import Console

    from indexing.services.index_config import index_config_apply
    from pmd_site.cli.up import _index_config_from_up, choose_llm_backend

    for name in INDEX_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
        setattr(settings, name, type(getattr(settings, name))(value))  # the settings read the environment
    index_config_apply()  # as a new process does when it first reaches the database
    out = io.StringIO()
    backend, why = choose_llm_backend()
    _index_config_from_up(dict(os.environ), backend, Console(file=out, width=300))
    return backend, why, out.getvalue()


@pytest.mark.django_db
def test_the_readme_recipe_after_a_first_run_without_a_model_server_uses_ollama(
    ollama_server, ollama_down, monkeypatch, settings, tmp_path, eager_tasks
):
    """A first `pmd up` without a model server chose the local backend (and its empty answer model);
    the README's `OLLAMA_URL=… PMD_EMBED_MODEL=all-minilm PMD_CHUNK_TOKENS=250 pmd up` then uses Ollama."""
    from indexing.services.index_config import index_config_effective, index_config_get

    settings.PMD_HOME = tmp_path
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ollama_server.reset()
    ollama_server.add_model("all-minilm", dims=384)
    backend, why, _ = _start_pmd_up(monkeypatch, settings)
    assert backend == "local" and "no Ollama" in why
    rows = {row["name"]: row for row in index_config_effective()}
    assert rows["PMD_LLM_BACKEND"]["value"] == "local" and rows["PMD_LLM_BACKEND"]["source"] == "automatic"
    assert rows["PMD_ANSWER_MODEL"]["index"] == "" and rows["PMD_ANSWER_MODEL"]["source"] == "automatic"
    assert rows["PMD_CHUNK_TOKENS"]["value"] == "506"  # the window of multilingual-e5-small, as used
    assert rows["PMD_CHUNK_TOKENS"]["source_words"].startswith("chosen automatically: sized to the window")

    backend, why, _ = _start_pmd_up(monkeypatch, settings)  # no model server named: the earlier choice stands
    assert backend == "local" and "chosen automatically" in why and "OLLAMA_URL" in why

    backend, why, printed = _start_pmd_up(
        monkeypatch, settings, OLLAMA_URL=ollama_server.url, PMD_EMBED_MODEL="all-minilm", PMD_CHUNK_TOKENS="250"
    )
    assert (
        backend == "ollama"
        and why == f"models: Ollama at {ollama_server.url} (backend chosen automatically: it answers)"
    )
    stored = index_config_get()
    assert stored["PMD_LLM_BACKEND"] == "ollama" and stored["PMD_EMBED_MODEL"] == "all-minilm"
    assert stored["PMD_CHUNK_TOKENS"] == "250" and stored["OLLAMA_URL"] == ollama_server.url
    assert stored["PMD_ANSWER_MODEL"] == settings.PMD_MODEL_DEFAULTS["ollama"]["PMD_ANSWER_MODEL"] != ""
    assert "configuration: PMD_LLM_BACKEND: local → ollama" in printed
    answer_model = settings.PMD_MODEL_DEFAULTS["ollama"]["PMD_ANSWER_MODEL"]
    assert f'configuration: PMD_ANSWER_MODEL: "" → {answer_model}' in printed  # the empty choice, re-made
    assert "configuration: PMD_EMBED_MODEL: intfloat/multilingual-e5-small → all-minilm" in printed
    rows = {row["name"]: row for row in index_config_effective()}
    assert rows["PMD_EMBED_MODEL"]["source"] == "environment"
    for name in INDEX_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    rows = {row["name"]: row for row in index_config_effective()}
    assert rows["PMD_EMBED_MODEL"]["source"] == "index" and rows["PMD_LLM_BACKEND"]["source"] == "automatic"


@pytest.mark.django_db
def test_a_backend_a_person_chose_is_never_chosen_again(ollama_server, monkeypatch, settings, tmp_path):
    from indexing.services.index_config import index_config_get

    ollama_server.reset()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    settings.PMD_HOME = tmp_path
    index_config_set(values={"PMD_LLM_BACKEND": "local"})
    backend, why, _ = _start_pmd_up(monkeypatch, settings, OLLAMA_URL=ollama_server.url)
    assert backend is None and why.startswith("models: local backend (PMD_LLM_BACKEND from the index's configuration)")
    assert "cannot be downloaded: HF_HUB_OFFLINE is set" in why  # offline: said at start, not when embedding
    assert index_config_get()["PMD_LLM_BACKEND"] == "local"


@pytest.mark.django_db
def test_config_set_reports_every_change_and_config_show_says_where_each_value_comes_from(
    run_cli, monkeypatch, settings
):
    settings.PMD_LLM_BACKEND = "ollama"  # what the index's configuration sets below is undone after the test
    for name in INDEX_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    index_config_set(
        values={"PMD_LLM_BACKEND": "local", "PMD_ANSWER_MODEL": "", "PMD_GENERATE_MODEL": ""}, automatic=True
    )
    code, out, err = run_cli(
        "config",
        "set",
        "PMD_LLM_BACKEND=ollama",
        "OLLAMA_URL=http://127.0.0.1:9",
        "PMD_ANSWER_MODEL=qwen3:1.7b",
        "PMD_CHUNK_TOKENS=250",
        "--yes",
    )
    assert code == 0, err
    generate = settings.PMD_MODEL_DEFAULTS["ollama"]["PMD_GENERATE_MODEL"]
    assert f'PMD_GENERATE_MODEL: "" → {generate}' in out  # pmd's choice for the old backend follows the new one
    for change in (
        "PMD_LLM_BACKEND: local → ollama",
        "OLLAMA_URL: (not set) → http://127.0.0.1:9",
        'PMD_ANSWER_MODEL: "" → qwen3:1.7b',
        "PMD_CHUNK_TOKENS: (not set) → 250",
    ):
        assert change in out
    monkeypatch.setenv("PMD_RERANK_MODEL", "bge")
    code, out, err = run_cli("config", "show")
    lines = {line.split("=", 1)[0]: line for line in out.splitlines()}
    assert lines["PMD_LLM_BACKEND"].endswith("(the index's configuration)")
    assert lines["PMD_RERANK_MODEL"].endswith("(this process's environment)")
    assert lines["PMD_CHUNK_OVERLAP"].endswith("(default)")


@pytest.mark.django_db
def test_the_status_models_line_says_where_the_backend_comes_from(run_cli, ollama, monkeypatch, settings, tmp_path):
    for name in INDEX_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    index_config_set(
        values={"PMD_LLM_BACKEND": "ollama", "OLLAMA_URL": ollama.url, "PMD_EMBED_MODEL": "embeddinggemma"}
    )
    code, out, err = run_cli("status")
    assert f"answers (ollama at {ollama.url}; backend: the index's configuration)" in out
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    settings.PMD_HOME = tmp_path
    index_config_set(
        values={"PMD_LLM_BACKEND": "local", "PMD_EMBED_MODEL": "intfloat/multilingual-e5-small"},
        automatic=True,
        replace_vectors=True,
    )
    code, out, err = run_cli("status")
    assert "backend: local (chosen automatically)" in out and "backend_from" not in out


@pytest.mark.django_db
def test_a_running_worker_embeds_again_with_the_chunking_another_process_just_set(minilm_index, run_cli):
    """`pmd config set PMD_CHUNK_TOKENS=… --yes` while `pmd up` runs: the running worker's job uses
    the new chunking (it started with the old), and status says so instead of "up to date"."""
    from indexing.models import IndexSetting, Job
    from indexing.services.embedding_queue import embedding_job_run
    from indexing.services.jobs import job_create

    old = minilm_index.PMD_CHUNK_TOKENS
    new = old - 50
    # What `pmd config set` writes from its own process: this one (the worker) still holds the old value.
    IndexSetting.objects.update_or_create(name="PMD_CHUNK_TOKENS", defaults={"value": str(new)})
    assert minilm_index.PMD_CHUNK_TOKENS == old
    code, out, err = run_cli("status", "--json")
    embeddings = json.loads(out)["embeddings"]
    assert embeddings["chunking"]["max_tokens"] == new and embeddings["pending"] > 0  # not "up to date"
    report = embedding_job_run(job=job_create(kind=Job.Kind.EMBED))  # the job `config set` queued
    assert report["chunks"] > 0
    code, out, err = run_cli("status", "--json")
    embeddings = json.loads(out)["embeddings"]
    assert embeddings["chunking"]["max_tokens"] == new and embeddings["pending"] == 0
    assert embeddings["stale_fingerprints"] == []  # the old chunking's vectors went
