"""int8 copies of local embedding models (PMD_LOCAL_PRECISION=int8).

Hub exports are fp32. On a CPU with int8 instructions (VNNI) the matrix products of an int8 copy
run faster and the copy is a quarter of the size; loading it and running it keeps far less memory
in the embedding process. The copy is made once per model file with ONNX Runtime's dynamic
quantization (int8 weights with one scale per output channel, activations quantized as they come)
and kept under $PMD_HOME/models/.int8; the README (Models) has the quality and speed measured.

The copy is made in a child process: quantizing holds the whole fp32 graph and its copy in memory
for a few seconds, which a long-lived worker would otherwise keep as heap for the rest of its life.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

# Bump when the way copies are made changes: old copies are then remade, not reused.
QUANTIZE_VERSION = 1
# Operators that only a quantized graph has: such a file is used as it is.
QUANTIZED_OPS = {"MatMulInteger", "DynamicQuantizeLinear", "QLinearMatMul", "DequantizeLinear", "QuantizeLinear",
                 "QAttention", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "MatMulNBits", "QGemm"}
COPIES_DIR = ".int8"


def is_quantized(path: Path) -> bool:
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return any(node.op_type in QUANTIZED_OPS for node in graph.node)


def copy_path(source: Path, models_dir: Path) -> Path:
    """Where the int8 copy of `source` lives: named by the file's path, size and time, so a model
    replaced in place gets a new copy."""
    import onnxruntime

    stat = source.stat()
    described = f"{source.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{QUANTIZE_VERSION}|{onnxruntime.__version__}"
    digest = hashlib.sha256(described.encode()).hexdigest()[:20]
    return models_dir / COPIES_DIR / digest / "model.onnx"


def int8_model(source: Path, models_dir: Path) -> Path:
    """The file to load for int8: `source` itself when it is quantized already, else its int8
    copy, made now if it is not there yet. Falls back to `source` (with a warning) when the copy
    cannot be made: embedding still works, at fp32 speed."""
    target = copy_path(source, models_dir)
    if target.is_file():
        return target
    try:
        if is_quantized(source):
            return source
    except ImportError:
        logger.warning("PMD_LOCAL_PRECISION=int8 needs the onnx package (the local extra): using %s as it is", source)
        return source
    except Exception as exc:  # noqa: BLE001 - onnx raises its own kinds on a file it cannot parse
        logger.warning("cannot read %s to quantize it (%s): using it as it is", source, exc)
        return source
    logger.warning("making an int8 copy of %s (once, a few seconds per 100 MB)", source)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, scratch = tempfile.mkstemp(dir=target.parent, suffix=".onnx.part")
    os.close(handle)
    try:
        done = subprocess.run([sys.executable, "-m", "indexing.llm.quantize", str(source), scratch],
                              capture_output=True, text=True, timeout=1800,
                              cwd=str(Path(__file__).resolve().parents[2]))
        if done.returncode != 0:
            reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
            logger.warning("cannot make an int8 copy of %s (%s): using it as it is", source, reason[:300])
            return source
        os.replace(scratch, target)  # whole or not at all, also when two processes race
    except (OSError, subprocess.SubprocessError) as exc:
        logger.warning("cannot make an int8 copy of %s (%s): using it as it is", source, exc)
        return source
    finally:
        if os.path.exists(scratch):
            os.unlink(scratch)
    return target


def quantize(source: str, target: str) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process is for static quantization
    quantize_dynamic(source, target, per_channel=True, weight_type=QuantType.QInt8,
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})


if __name__ == "__main__":
    quantize(sys.argv[1], sys.argv[2])
