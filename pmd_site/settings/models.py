"""The language models: the backend and its server, the models for embedding, expansion,
re-ranking and Ask, chunking, the local in-process models, deadlines and vector search."""

from __future__ import annotations

from indexing.errors import ConfigError
from pmd_site import env
from pmd_site.settings.table import MODEL_DEFAULTS as _MODEL_DEFAULTS
from pmd_site.settings.table import read
from pmd_site.settings.workers import PMD_PROFILE

OLLAMA_URL = read("OLLAMA_URL")
PMD_LLM_BACKEND = read("PMD_LLM_BACKEND")  # an unknown one is refused where a client is made
PMD_OPENAI_BASE_URL = read("PMD_OPENAI_BASE_URL")
PMD_OPENAI_API_KEY = read("PMD_OPENAI_API_KEY")
# Each backend's default models (in-process models, indexing/llm/local.py, have their own); also
# used when the index's configuration chooses the backend (indexing/services/index_config.py).
PMD_MODEL_DEFAULTS = _MODEL_DEFAULTS
_DEFAULTS = PMD_MODEL_DEFAULTS["local" if PMD_LLM_BACKEND == "local" else "ollama"]
PMD_EMBED_MODEL = read("PMD_EMBED_MODEL", _DEFAULTS["PMD_EMBED_MODEL"])
PMD_CHUNK_TOKENS = read("PMD_CHUNK_TOKENS")
# Unset: the local backend sizes chunks to its model's window (multilingual-e5-small: 512 word pieces).
PMD_CHUNK_TOKENS_FROM_MODEL = env.get_str("PMD_CHUNK_TOKENS") == ""
PMD_CHUNK_OVERLAP = read("PMD_CHUNK_OVERLAP")
PMD_CHUNK_WINDOW = read("PMD_CHUNK_WINDOW")
PMD_EMBED_QUERY_PROMPT = read("PMD_EMBED_QUERY_PROMPT")
PMD_EMBED_DOC_PROMPT = read("PMD_EMBED_DOC_PROMPT")
PMD_EMBED_BATCH = read("PMD_EMBED_BATCH")
PMD_GENERATE_MODEL = read("PMD_GENERATE_MODEL", _DEFAULTS["PMD_GENERATE_MODEL"])
PMD_RERANK_MODEL = read("PMD_RERANK_MODEL", _DEFAULTS["PMD_RERANK_MODEL"])
# A model the server does not have (404) is not asked for again for this long (seconds): its stage is
# skipped quietly meanwhile (search.pipeline.absent); 0 asks every query.
PMD_MISSING_MODEL_RECHECK = read("PMD_MISSING_MODEL_RECHECK")
PMD_RERANK_API = read("PMD_RERANK_API")
PMD_RERANK_URL = read("PMD_RERANK_URL")
PMD_RERANK_BATCH = read("PMD_RERANK_BATCH")
PMD_LOCAL_THREADS = read("PMD_LOCAL_THREADS")
# Texts per inference of the local models (0: 8). Fewer keep ONNX Runtime's buffers smaller.
PMD_LOCAL_BATCH = read("PMD_LOCAL_BATCH")
# Set by `pmd up` for its children: the Unix socket on which the process that embeds serves the
# local models to the others (indexing/llm/shared.py), so only it loads them.
PMD_MODEL_SOCKET = read("PMD_MODEL_SOCKET")
# int8: the local embedding model runs as an int8 copy made once (indexing/llm/quantize.py), faster
# and smaller but 0.014 nDCG@10 below on half of SciFact's and Cranfield's queries; fp32: as exported.
# The small profile's default is int8 (memory first), the others' fp32 (quality first).
PMD_LOCAL_PRECISION = read("PMD_LOCAL_PRECISION", "int8" if PMD_PROFILE == "small" else "fp32")
# `pmd query` deadlines (seconds): the whole query, and its expansion / re-ranking stages.
PMD_QUERY_TIMEOUT = read("PMD_QUERY_TIMEOUT")
PMD_EXPAND_TIMEOUT = read("PMD_EXPAND_TIMEOUT")
PMD_RERANK_TIMEOUT = read("PMD_RERANK_TIMEOUT")
for _name in ("PMD_QUERY_TIMEOUT", "PMD_EXPAND_TIMEOUT", "PMD_RERANK_TIMEOUT"):
    if globals()[_name] <= 0:
        raise ConfigError(f"{_name}={globals()[_name]} must be more than 0 seconds")
PMD_RERANK_CONCURRENCY = read("PMD_RERANK_CONCURRENCY")
PMD_LLM_TIMEOUT = read("PMD_LLM_TIMEOUT")
PMD_LLM_RETRIES = read("PMD_LLM_RETRIES")
PMD_LLM_RETRY_BACKOFF = read("PMD_LLM_RETRY_BACKOFF")
PMD_OLLAMA_KEEP_ALIVE = read("PMD_OLLAMA_KEEP_ALIVE")
PMD_HNSW_EF_SEARCH = read("PMD_HNSW_EF_SEARCH")
# What the HNSW index holds: full-precision `vector` or half-precision `halfvec` (half the index,
# the memory that must stay cached; the table keeps full precision). README, "Scale".
PMD_VECTOR_STORAGE = read("PMD_VECTOR_STORAGE")
# `pmd query` ranking signals from the notes' structure (search.pipeline.signals); 0 = off.
PMD_LINK_BOOST = max(0.0, read("PMD_LINK_BOOST"))
PMD_RECENCY_BOOST = max(0.0, read("PMD_RECENCY_BOOST"))

# Ask (search.pipeline.answer): the chat model answering from the notes ("" or none: Ask off,
# search as before), the passages' token budget, the deadline, the score under which the notes
# do not cover a question, and questions per user per minute (0: no limit).
PMD_ANSWER_MODEL = read("PMD_ANSWER_MODEL", _DEFAULTS["PMD_ANSWER_MODEL"])
PMD_ANSWER_BUDGET = read("PMD_ANSWER_BUDGET")
PMD_ANSWER_PASSAGES = read("PMD_ANSWER_PASSAGES")
PMD_ANSWER_TIMEOUT = read("PMD_ANSWER_TIMEOUT")
if PMD_ANSWER_TIMEOUT <= 0:
    raise ConfigError(f"PMD_ANSWER_TIMEOUT={PMD_ANSWER_TIMEOUT} must be more than 0 seconds")
PMD_ANSWER_MIN_SCORE = read("PMD_ANSWER_MIN_SCORE")
PMD_ANSWER_RATE = read("PMD_ANSWER_RATE")
