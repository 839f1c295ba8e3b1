"""The processes `pmd up` runs, and how many each costs (memory on small boxes)."""

from __future__ import annotations

import argparse

from pmd_site.cli import services, up

pytest_plugins = ["tests.support.local_models"]


def _up_args(**overrides):
    values = dict(host="127.0.0.1", port=8000, no_watch=False)
    values.update(overrides)
    return argparse.Namespace(**values)


def test_pmd_up_runs_each_worker_as_one_process_with_a_thread_for_its_task():
    children = {name: argv for name, *argv in up.up_children(_up_args(), broker=True, watch=True)}
    assert set(children) == {"web", "worker", "embedder", "beat", "watcher"}
    for name in ("worker", "embedder"):
        argv = children[name]
        assert argv[argv.index("--pool") + 1] == "threads"
        assert argv[argv.index("--concurrency") + 1] == "1"
    assert children["worker"][-1] == "index" and children["embedder"][-1] == "embed"


def test_pmd_up_without_a_broker_or_watching_runs_only_the_web_server():
    children = up.up_children(_up_args(no_watch=True), broker=False, watch=True)
    assert [name for name, *_ in children] == ["web"]


def test_pmd_worker_hands_the_pool_to_celery(monkeypatch):
    import contextlib

    import pmd_site.celery

    seen = []
    monkeypatch.setattr("pmd_site.runtime.process.database_lease", contextlib.nullcontext)
    monkeypatch.setattr(pmd_site.celery.app, "worker_main", seen.append)
    monkeypatch.setenv("PMD_SUPERVISOR_PID", "")
    services.cmd_worker(argparse.Namespace(queues="embed", concurrency=1, pool="threads"))
    assert "--pool=threads" in seen[0] and "--queues=pmd-embed" in seen[0]
    services.cmd_worker(argparse.Namespace(queues="all", concurrency=None, pool=None))
    assert not any(arg.startswith("--pool") for arg in seen[1])  # celery's own default


def test_the_small_profile_runs_web_and_one_worker_with_the_scheduler_and_watcher_inside():
    children = {name: argv for name, *argv in up.up_children(_up_args(), broker=True, watch=True, profile="small")}
    assert set(children) == {"web", "worker"}
    worker = children["worker"]
    assert worker[worker.index("--queues") + 1] == "all"
    assert worker[worker.index("--pool") + 1] == "threads"
    assert {"--with-beat", "--with-watcher"} <= set(worker)
    assert up.SMALL_PROFILE_BATCH <= 4  # pmd up gives it PMD_LOCAL_BATCH: smaller ONNX buffers
    quiet = {
        name: argv for name, *argv in up.up_children(_up_args(no_watch=True), broker=True, watch=True, profile="small")
    }
    assert "--with-watcher" not in quiet["worker"]


def test_only_the_worker_that_embeds_serves_the_models(monkeypatch, settings):
    import contextlib

    import pmd_site.celery
    from indexing.llm import shared

    served = []

    class Listener:
        def close(self):
            served.append("closed")

    monkeypatch.setattr("pmd_site.runtime.process.database_lease", contextlib.nullcontext)
    monkeypatch.setattr(pmd_site.celery.app, "worker_main", lambda argv: None)
    monkeypatch.setattr(shared, "serve_models", lambda path, backend_for: served.append(path) or Listener())
    monkeypatch.setenv("PMD_SUPERVISOR_PID", "")
    settings.PMD_MODEL_SOCKET = "/run/pmd/models.sock"
    services.cmd_worker(argparse.Namespace(queues="index", concurrency=1, pool="threads"))
    assert served == []
    services.cmd_worker(argparse.Namespace(queues="embed", concurrency=1, pool="threads"))
    assert served == ["/run/pmd/models.sock", "closed"]


def test_with_int8_models_pmd_up_makes_the_copy_before_the_services_start(settings, tmp_path, minilm, capsys):
    """Made beside the running services, the copy was the first start's peak of memory."""
    from indexing.llm.quantize import copy_path, is_quantized
    from pmd_site.cli.output import stdout_console

    settings.PMD_HOME, settings.PMD_LLM_BACKEND, settings.PMD_EMBED_MODEL = tmp_path, "local", str(minilm)
    up._int8_copy_before_start({"PMD_LOCAL_PRECISION": "fp32"}, stdout_console())
    assert not (tmp_path / "models").exists()  # fp32: nothing to prepare (the worker loads it when it embeds)
    up._int8_copy_before_start({"PMD_LOCAL_PRECISION": "int8"}, stdout_console())
    assert is_quantized(copy_path(minilm / "model.onnx", tmp_path / "models"))
    assert f"models: {minilm} ready in int8" in capsys.readouterr().out


def test_a_model_that_cannot_be_had_before_the_start_is_left_to_the_worker(settings, tmp_path, capsys):
    from pmd_site.cli.output import stdout_console

    settings.PMD_HOME, settings.PMD_LLM_BACKEND = tmp_path, "local"
    settings.PMD_EMBED_MODEL = str(tmp_path / "no-such-model")
    up._int8_copy_before_start({"PMD_LOCAL_PRECISION": "int8"}, stdout_console())  # warns, does not raise
    assert "the worker tries again when it first embeds" in capsys.readouterr().err
