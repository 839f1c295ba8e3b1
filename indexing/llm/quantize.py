"""int8 copies of local embedding models (PMD_LOCAL_PRECISION=int8).

Hub exports are fp32. On a CPU with int8 instructions (VNNI) the matrix products of an int8 copy
run faster and the copy is a quarter of the size; loading it and running it keeps far less memory
in the embedding process. The copy is made once per model file, as ONNX Runtime's dynamic
quantization makes it (int8 weights with one scale per output channel, activations quantized as
they come; indexing/llm/int8_graph.py makes the same graph with half the memory), and kept under
$PMD_HOME/models/.int8; the README (Models) has the quality and speed measured.

The copy is made in a child process: quantizing holds the whole fp32 graph and its copy in memory
for a few seconds, which a long-lived worker would otherwise keep as heap for the rest of its life.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

# Bump when the way copies are made changes: old copies are then remade, not reused.
QUANTIZE_VERSION = 1
# Operators that only a quantized graph has: such a file is used as it is.
QUANTIZED_OPS = {
    "MatMulInteger",
    "DynamicQuantizeLinear",
    "QLinearMatMul",
    "DequantizeLinear",
    "QuantizeLinear",
    "QAttention",
    "DynamicQuantizeMatMul",
    "MatMulIntegerToFloat",
    "MatMulNBits",
    "QGemm",
}
COPIES_DIR = ".int8"


def is_quantized(path: Path) -> bool:
    import onnx

    return _computes_in_int8(onnx.load(str(path), load_external_data=False).graph)


def _computes_in_int8(graph) -> bool:
    return any(node.op_type in QUANTIZED_OPS for node in graph.node)


def copy_path(source: Path, models_dir: Path) -> Path:
    """Where the int8 copy of `source` lives: named by the file's path, size and time, so a model
    replaced in place gets a new copy."""
    import onnxruntime

    stat = source.stat()
    described = f"{source.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{QUANTIZE_VERSION}|{onnxruntime.__version__}"
    digest = hashlib.sha256(described.encode()).hexdigest()[:20]
    return models_dir / COPIES_DIR / digest / "model.onnx"


# The child's exit status when the file computes in int8 already (nothing to copy).
ALREADY_INT8 = 3


def int8_model(source: Path, models_dir: Path) -> Path:
    """The file to load for int8: the int8 copy of `source`, made now if it is not there yet, or
    `source` itself when it computes in int8 already. Falls back to `source` (with a warning) when
    no copy can be made, and remembers that, so a machine that cannot make it does not try at
    every start: embedding still works, at fp32 speed. Reading the graph happens in the child too:
    parsing a model file in this process would leave its size in the heap."""
    target = copy_path(source, models_dir)
    as_it_is, failed = target.with_name("already-int8"), target.with_name("failed")
    if target.is_file():
        return target
    if as_it_is.is_file() or failed.is_file():
        return source
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.with_name("lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a second process waits, then takes the copy made
            if target.is_file():
                return target
            if as_it_is.is_file() or failed.is_file():
                return source
            return _make(source, target, as_it_is, failed)
    except OSError as exc:
        logger.warning("cannot make an int8 copy of %s (%s): running it as exported", source, exc)
        return source


def _make(source: Path, target: Path, as_it_is: Path, failed: Path) -> Path:
    for stale in target.parent.glob("*.part*"):  # left by a child that was stopped
        stale.unlink(missing_ok=True)
    handle, scratch = tempfile.mkstemp(dir=target.parent, suffix=".onnx.part")
    os.close(handle)
    try:
        logger.warning("making an int8 copy of %s (once, a few seconds per 100 MB)", source)
        done = subprocess.run(
            [sys.executable, "-m", "indexing.llm.quantize", str(source), scratch, str(os.getpid())],
            capture_output=True,
            text=True,
            timeout=1800,
            cwd=str(Path(__file__).resolve().parents[2]),
            env=dict(os.environ, TMPDIR=str(target.parent)),
        )
        if done.returncode == ALREADY_INT8:
            as_it_is.write_text(f"{source}\n")
            return source
        if done.returncode != 0:
            reason = (
                done.stderr.strip().splitlines()
                or [f"stopped by signal {-done.returncode}" if done.returncode < 0 else "no message"]
            )[-1][:300]
            failed.write_text(f"{source}\n{reason}\n")
            logger.warning(
                "cannot make an int8 copy of %s (%s): running it as exported from now on "
                "(PMD_LOCAL_PRECISION=fp32 says so; delete %s to try again)",
                source,
                reason,
                failed,
            )
            return source
        os.replace(scratch, target)  # whole or not at all
    except subprocess.SubprocessError as exc:
        failed.write_text(f"{source}\n{exc}\n")
        logger.warning("cannot make an int8 copy of %s (%s): running it as exported", source, exc)
        return source
    finally:  # the child's scratch files too, when it was stopped (timeout, out of memory)
        for leftover in target.parent.glob("*.part*"):
            leftover.unlink(missing_ok=True)
    return target


def _stop_with(parent: int) -> None:
    """Stop when the process that asked for the copy stops (Linux): a copy nobody waits for would
    hold hundreds of MB until it is done, and the next start makes it again anyway."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the copy runs to its end
        return
    if os.getppid() != parent:  # it stopped before the line above
        os._exit(1)


def quantize(source: str, target: str, parent: int | None = None) -> int:
    """The child's work: 0 when `target` holds the int8 copy, ALREADY_INT8 when there is nothing to do."""
    if parent is not None:
        _stop_with(parent)
    try:  # if memory runs out while the copy is made, this child is the process to stop
        Path("/proc/self/oom_score_adj").write_text("1000")
    except OSError:
        pass
    import onnx

    model = onnx.load(source, load_external_data=False)  # the whole graph, unless its weights sit beside it
    if _computes_in_int8(model.graph):
        return ALREADY_INT8
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
        del model  # its weights sit in files beside it, which only a load from its own folder finds
        _quantizer(onnx.load(source), target)
    elif _int8_graph_loads(model, target):
        return 0  # loaded already
    else:
        del model
        # Given a path, the quantizer writes its shape-inferred scratch file beside that path, which
        # must not be the source's folder (read-only, or shared with another process making the same
        # copy): so it gets a link in the copy's own folder, locked and ours to write in. (Given the
        # graph in memory it would hold that and a copy of its own: 586 MB at the peak for MiniLM's
        # 91 MB file, against about 490 from a path and 260 with int8_graph; README, Models.)
        link = Path(target).with_suffix(".source.part.onnx")
        try:
            os.symlink(Path(source).resolve(), link)
            _quantizer(link, target)
        finally:
            for scratch in link.parent.glob(link.stem + "*"):  # the link and the quantizer's `…-inferred.onnx`
                scratch.unlink(missing_ok=True)
    return _kept_if_it_loads(target)


def _int8_graph_loads(model, target: str) -> bool:
    """pmd's rewrite (indexing/llm/int8_graph.py) into `target`, when it covers the graph (`model`,
    changed in place) and ONNX Runtime loads the copy."""
    import onnx

    from indexing.llm.int8_graph import int8_graph

    try:
        copy = int8_graph(model)
    except Exception as exc:  # noqa: BLE001 - ONNX Runtime's quantizer makes the same graph with more memory
        print(f"pmd's int8 graph failed ({type(exc).__name__}: {exc}): using ONNX Runtime's quantizer", file=sys.stderr)
        return False
    if copy is None:
        return False
    bare = Path(target + ".bare.part")
    onnx.save(copy, bare)
    del copy
    model.Clear()  # the caller's reference too: its weights are not needed any more
    # The shapes, recorded as the quantizer records them: with them ONNX Runtime runs the copy exactly
    # as it runs the quantizer's own (the same vectors, bit for bit). From file to file: held in this
    # process, the graph would be held twice more.
    onnx.shape_inference.infer_shapes_path(str(bare), target)
    bare.unlink()
    problem = _cannot_load(target)
    if problem is not None:
        print(f"pmd's int8 graph does not load ({problem}): using ONNX Runtime's quantizer", file=sys.stderr)
    return problem is None


def _quantizer(model, target: str) -> None:
    """ONNX Runtime's dynamic quantizer, as pmd's copies are made: int8 weights per output channel."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process is for static quantization
    quantize_dynamic(
        model,
        target,
        per_channel=True,
        weight_type=QuantType.QInt8,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )


def _kept_if_it_loads(target: str) -> int:
    problem = _cannot_load(target)
    if problem is not None:  # remembered as failed: the model then runs as exported
        raise SystemExit(f"the int8 copy does not load: {problem}")
    return 0


def _cannot_load(path: str) -> str | None:
    """Why ONNX Runtime cannot load the copy, or None: a copy kept is used at every start, so one
    that does not load must not be kept."""
    import onnxruntime

    try:
        onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - any reason is a reason not to keep it
        return str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
    return None


if __name__ == "__main__":
    raise SystemExit(quantize(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else None))
