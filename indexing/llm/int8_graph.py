"""The int8 copy of an encoder's graph, one weight at a time (run in the child of indexing/llm/quantize.py).

ONNX Runtime's dynamic quantizer holds the fp32 graph twice and makes several fp32 temporaries of
the word-embedding table: 490 MB at its peak for MiniLM's 91 MB file, more than the rest of
`pmd up --profile small` together. This makes the same graph (the same nodes, names and
initializers; ONNX Runtime's own functions compute every scale and quantized value, the largest
tables in slices) while holding the fp32 graph once and freeing each weight as it is replaced.

It covers what sentence encoders are made of: MatMul with a constant 2-D weight (int8 weights with
one scale per output column; activations quantized as they come), Gather from a constant table
(uint8 with one scale) and Gemm (rewritten as MatMul first, as the quantizer does). `int8_graph`
returns None for anything else it would have to quantize, and the caller then uses ONNX Runtime's
quantizer as it is.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization.quant_utils import compute_data_quant_params, quantize_nparray

# What ONNX Runtime's dynamic quantizer would quantize that is not handled here.
UNHANDLED = {"Conv", "Attention", "LSTM", "EmbedLayerNormalization"}
SLICE_VALUES = 1 << 20  # a table is quantized this many values at a time


class Unhandled(Exception):
    """The graph needs something only ONNX Runtime's quantizer does."""


def int8_graph(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """Turn `model` (changed in place) into its int8 copy; None (model unchanged or not) when it has a
    part only ONNX Runtime's quantizer handles."""
    try:
        return _Quantizer(model).run()
    except Unhandled:
        return None


class _Quantizer:
    def __init__(self, model: onnx.ModelProto):
        self.model, self.graph = model, model.graph
        self.initializers = {t.name: t for t in self.graph.initializer}
        self.quantized: dict[str, tuple[str, str, str]] = {}  # value -> its int8 value, scale, zero point
        self.constants: set[str] = set()  # the weights and tables among them
        # What the nodes written so far make; the graph's inputs count as made (never dequantized).
        self.made: set[str] = {i.name for i in self.graph.input}
        self.nodes: list[onnx.NodeProto] = []
        self.taken: set[str] = set()  # every name in the graph: a name the copy needs must be free

    def run(self) -> onnx.ModelProto:
        opset = max((o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx")), default=0)
        if (
            opset < 11  # DynamicQuantizeLinear: older graphs get the quantizer's unfused nodes and a new opset
            or self.graph.sparse_initializer
            or any(
                a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                for n in self.graph.node
                for a in n.attribute
            )
            or any(i.name in self.initializers for i in self.graph.input)
        ):  # older exports list weights as inputs
            raise Unhandled
        tensors = (
            {t.name for t in self.graph.initializer}
            | self.made
            | {o.name for o in self.graph.output}
            | {v.name for v in self.graph.value_info}
            | {name for n in self.graph.node for name in (*n.input, *n.output)}
        )
        self.taken = tensors | {n.name for n in self.graph.node}
        self._gemm_as_matmul(set(tensors))
        self._check_weights_have_one_use()
        for node in list(self.graph.node):
            first = len(self.nodes)
            if node.op_type in UNHANDLED:
                raise Unhandled
            # A weight two nodes share is quantized once (its fp32 initializer is gone by the second).
            if node.op_type == "MatMul" and (node.input[1] in self.constants or self._float_initializer(node.input[1])):
                self._matmul(node)
            elif node.op_type == "Gather" and (
                node.input[0] in self.constants or self._float_initializer(node.input[0])
            ):
                self._gather(node)
            else:
                if node.op_type == "Transpose" and node.input[0] in self.quantized:
                    raise Unhandled  # the quantizer would carry the int8 value through it
                for name in node.input:
                    self._dequantized(name)
                self.nodes.append(node)
            for made in self.nodes[first:]:
                self.made.update(made.output)
        for output in self.graph.output:
            self._dequantized(output.name)
        self.graph.ClearField("node")
        self.graph.node.extend(self.nodes)
        self._drop_unused_initializers()
        self.model.producer_name, self.model.producer_version = "onnx.quantize", "0.1.0"
        return self.model

    # -- the quantizer's preparation -------------------------------------------------------

    def _gemm_as_matmul(self, names: set[str]) -> None:
        """Gemm with alpha = beta = 1 and no transposed A: MatMul (+ Add for a bias), a transposed
        weight added as an initializer of its own, as ONNX Runtime's quantizer rewrites it. `names`:
        the graph's tensor names, which a transposed weight's name (and those derived from it) avoid."""
        rewritten, transposed = [], {}
        for node in self.graph.node:
            attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            if node.op_type != "Gemm" or (
                attributes.get("alpha", 1.0),
                attributes.get("beta", 1.0),
                attributes.get("transA", 0),
            ) != (1.0, 1.0, 0):
                rewritten.append(node)
                continue
            weight = node.input[1]
            if attributes.get("transB", 0) == 1:
                if weight not in self.initializers:
                    raise Unhandled  # the quantizer adds a Transpose node here
                if weight not in transposed:
                    name, n = weight + "_Transposed", 0
                    while any(name + suffix in names for suffix in ("", "_quantized", "_scale", "_zero_point")):
                        n += 1
                        name = f"{weight}_Transposed_{n}"
                    names.update(name + suffix for suffix in ("", "_quantized", "_scale", "_zero_point"))
                    table = numpy_helper.from_array(numpy_helper.to_array(self.initializers[weight]).T, name)
                    self.graph.initializer.append(table)
                    self.initializers[name] = self.graph.initializer[-1]
                    transposed[weight] = name
                weight = transposed[weight]
            bias = len(node.input) > 2
            rewritten.append(
                helper.make_node(
                    "MatMul",
                    [node.input[0], weight],
                    [node.output[0] + ("_MatMul" if bias else "")],
                    name=node.name + "_MatMul" if node.name else "",
                )
            )
            if bias:
                rewritten.append(
                    helper.make_node(
                        "Add",
                        [node.output[0] + "_MatMul", node.input[2]],
                        list(node.output),
                        name=node.name + "_Add" if node.name else "",
                    )
                )
        self.graph.ClearField("node")
        self.graph.node.extend(rewritten)

    def _check_weights_have_one_use(self) -> None:
        """A weight also read as fp32 elsewhere would be dequantized there, one read both as a weight
        and as a table quantized two ways: not handled."""
        weights, tables, other_uses = set(), set(), set()
        for node in self.graph.node:
            for i, name in enumerate(node.input):
                if name not in self.initializers:
                    continue
                if (node.op_type, i) == ("MatMul", 1) and self._float_initializer(name):
                    weights.add(name)
                elif (node.op_type, i) == ("Gather", 0) and self._float_initializer(name):
                    tables.add(name)
                else:
                    other_uses.add(name)
            if node.op_type == "MatMul" and node.input[0] in self.initializers:
                raise Unhandled  # a constant activation: quantized as a weight by the quantizer
            if (
                node.op_type == "MatMul"
                and node.input[1] in self.initializers
                and not self._float_initializer(node.input[1])
            ):
                raise Unhandled
        if (weights | tables) & (other_uses | {o.name for o in self.graph.output}) or weights & tables:
            raise Unhandled  # (one constant as a weight and a table: quantized two ways)

    def _float_initializer(self, name: str) -> bool:
        table = self.initializers.get(name)
        if table is None:
            return False
        if table.data_type == TensorProto.FLOAT16 or table.data_location == TensorProto.EXTERNAL:
            raise Unhandled
        return table.data_type == TensorProto.FLOAT

    # -- the nodes ---------------------------------------------------------------------------

    def _matmul(self, node: onnx.NodeProto) -> None:
        activation, weight = node.input[0], node.input[1]
        if weight not in self.quantized and len(self.initializers[weight].dims) != 2:
            raise Unhandled
        if activation not in self.quantized:
            self.quantized[activation] = self._fresh(
                activation + "_quantized", activation + "_scale", activation + "_zero_point"
            )
            self.nodes.append(
                helper.make_node(
                    "DynamicQuantizeLinear",
                    [activation],
                    list(self.quantized[activation]),
                    *self._fresh(activation + "_QuantizeLinear"),
                )
            )
        if weight not in self.quantized:
            self._per_column(weight)
        a_q, a_scale, a_zero = self.quantized[activation]
        w_q, w_scale, w_zero = self.quantized[weight]
        name = node.name + "_quant" if node.name else ""
        product = node.output[0] + "_output_quantized"
        self._fresh(name, product, product + "_cast_output", product + "_cast")
        self.nodes.append(helper.make_node("MatMulInteger", [a_q, w_q, a_zero, w_zero], [product], name))
        self.nodes.append(
            helper.make_node("Cast", [product], [product + "_cast_output"], product + "_cast", to=TensorProto.FLOAT)
        )
        scales = name + "_scales_mul" if name else a_scale + "_" + w_scale + "_mul"
        existing = next((n for n in self.nodes if n.name == scales), None)
        if existing is None:
            existing = helper.make_node(
                "Mul", [a_scale, w_scale], list(self._fresh(scales + ":0")), *self._fresh(scales)
            )
            self.nodes.append(existing)
        self.nodes.append(
            helper.make_node(
                "Mul",
                [product + "_cast_output", existing.output[0]],
                [node.output[0]],
                *self._fresh(name + "_output_scale_mul" if name else ""),
            )
        )

    def _gather(self, node: onnx.NodeProto) -> None:
        table = node.input[0]
        if table not in self.quantized:
            self._per_table(table)
        output = node.output[0]
        self.quantized[output] = (*self._fresh(output + "_quantized"), *self.quantized[table][1:])
        node.output[0] = output + "_quantized"
        node.input[0] = self.quantized[table][0]
        self.nodes.append(node)

    def _dequantized(self, name: str) -> None:
        """The quantizer's DequantizeLinear before a node that reads an int8 value as fp32."""
        if name not in self.quantized or name in self.made:
            return
        node_name = name + "_DequantizeLinear"
        if any(n.name == node_name for n in self.nodes):
            return
        self.nodes.append(
            helper.make_node("DequantizeLinear", list(self.quantized[name]), [name], *self._fresh(node_name))
        )

    def _fresh(self, *names: str) -> tuple[str, ...]:
        """Names the copy adds; one the graph already has would make a different (or broken) graph."""
        for name in names:
            if name and name in self.taken:
                raise Unhandled
            self.taken.add(name)
        return names

    # -- the weights ---------------------------------------------------------------------------

    def _per_column(self, name: str) -> None:
        """int8, symmetric, one scale per output column (ONNX Runtime's per-channel weights)."""
        weights = numpy_helper.to_array(self.initializers[name])
        self._drop(name)
        columns, scales, zeros = [], [], []
        for i in range(weights.shape[1]):
            column = weights.take(i, 1).flatten()
            zero, scale = compute_data_quant_params(column, TensorProto.INT8, True, False)
            columns.append(np.asarray(quantize_nparray(TensorProto.INT8, column, scale, zero)).reshape(-1, 1))
            scales.append(scale)
            zeros.append(zero)
        shape = [weights.shape[1]]
        self._add(
            name,
            helper.make_tensor(name + "_scale", TensorProto.FLOAT, shape, np.hstack(scales).tolist()),
            helper.make_tensor(name + "_zero_point", TensorProto.INT8, shape, np.hstack(zeros).tolist()),
            numpy_helper.from_array(np.concatenate(columns, 1).astype(np.int8), name + "_quantized"),
        )

    def _per_table(self, name: str) -> None:
        """uint8 with one scale and zero point for the whole table (an activation's type), in slices."""
        values = numpy_helper.to_array(self.initializers[name])
        self._drop(name)
        flat = values.reshape(-1)
        zero, scale = compute_data_quant_params(flat, TensorProto.UINT8, False, False)
        quantized = np.empty(flat.shape, dtype=np.uint8)
        for start in range(0, flat.size, SLICE_VALUES):
            quantized[start : start + SLICE_VALUES] = quantize_nparray(
                TensorProto.UINT8, flat[start : start + SLICE_VALUES], scale, zero
            )
        shape = values.shape
        del values, flat
        self._add(
            name,
            helper.make_tensor(name + "_scale", TensorProto.FLOAT, [], scale.reshape(-1).tolist()),
            helper.make_tensor(name + "_zero_point", TensorProto.UINT8, [], zero.reshape(-1).tolist()),
            numpy_helper.from_array(quantized.reshape(shape), name + "_quantized"),
        )

    def _add(self, name: str, scale, zero, quantized) -> None:
        self._fresh(quantized.name, scale.name, zero.name)
        self.graph.initializer.extend([scale, zero, quantized])
        self.quantized[name] = (quantized.name, scale.name, zero.name)
        self.constants.add(name)

    def _drop(self, name: str) -> None:
        """The fp32 weight leaves the graph as soon as it is read: its memory goes with it."""
        for i, table in enumerate(self.graph.initializer):
            if table.name == name:
                del self.graph.initializer[i]
                break
        del self.initializers[name]

    def _drop_unused_initializers(self) -> None:
        """As the quantizer does at its end (a Gemm's weight, once transposed, is one)."""
        used = {name for node in self.graph.node for name in node.input} | {o.name for o in self.graph.output}
        for i in reversed([i for i, t in enumerate(self.graph.initializer) if t.name not in used]):
            del self.graph.initializer[i]
