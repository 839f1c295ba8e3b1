"""How each embedding model wants queries and documents phrased.

Asymmetric models are trained with a prefix that tells them whether a text is a
search query or a passage; embedding without it costs retrieval quality. The
templates use `{query}`, `{title}` and `{text}` placeholders (substituted
literally, so braces in user text are harmless). PMD_EMBED_QUERY_PROMPT and
PMD_EMBED_DOC_PROMPT override the template for the configured model.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class EmbedPrompts:
    query: str = "{query}"
    document: str = "{text}"

    def format_query(self, query: str) -> str:
        return self.query.replace("{query}", query)

    def format_document(self, text: str, *, title: str = "") -> str:
        # "none" is what embeddinggemma's model card asks for when there is no title.
        return self.document.replace("{title}", title.strip() or "none").replace("{text}", text)

    @property
    def digest(self) -> str:
        """Short id of the document template: changing it makes stored vectors stale."""
        return hashlib.sha256(self.document.encode()).hexdigest()[:8]


# Matched against the model name without tag or namespace, first match wins.
_KNOWN: list[tuple[str, EmbedPrompts]] = [
    ("embeddinggemma", EmbedPrompts("task: search result | query: {query}", "title: {title} | text: {text}")),
    ("nomic-embed", EmbedPrompts("search_query: {query}", "search_document: {text}")),
    ("mxbai-embed", EmbedPrompts("Represent this sentence for searching relevant passages: {query}", "{text}")),
    (
        "qwen3-embedding",
        EmbedPrompts(
            "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: {query}",
            "{text}",
        ),
    ),
    ("e5", EmbedPrompts("query: {query}", "passage: {text}")),
]


def _base_name(model: str) -> str:
    return model.rsplit("/", 1)[-1].split(":", 1)[0].lower()


def prompts_for(model: str, *, query_override: str = "", document_override: str = "") -> EmbedPrompts:
    base = _base_name(model)
    prompts = EmbedPrompts()
    for needle, known in _KNOWN:
        if needle == "e5":
            matched = base == "e5" or base.startswith("e5-") or "-e5-" in base or base.endswith("-e5")
        else:
            matched = needle in base
        if matched:
            prompts = known
            break
    return EmbedPrompts(query_override or prompts.query, document_override or prompts.document)


# Embedding models trained on English text only (matched like the prompts above): on a query in
# another language their vector is close to noise. Unknown models are taken as multilingual.
_ENGLISH_ONLY = (
    "all-minilm",
    "all-mpnet",
    "paraphrase-minilm",
    "paraphrase-mpnet",
    "msmarco-",
    "multi-qa-",
    "bge-small-en",
    "bge-base-en",
    "bge-large-en",
    "gte-small",
    "gte-base",
    "gte-large",
    "nomic-embed-text",
    "mxbai-embed-large",
    "snowflake-arctic-embed-",
    "e5-small",
    "e5-base",
    "e5-large",
)
_MULTILINGUAL = (
    "multilingual",
    "bge-m3",
    "embeddinggemma",
    "qwen3-embedding",
    "labse",
    "jina-embeddings-v3",
    "arctic-embed2",
    "granite-embedding",
    "nomic-embed-text-v2",
    "paraphrase-multilingual",
)


def model_is_english_only(model: str) -> bool:
    """Whether an embedding model knows English only (all-MiniLM-L6-v2: yes; multilingual-e5: no)."""
    base = _base_name(model)
    if any(needle in base for needle in _MULTILINGUAL):
        return False
    return any(base.startswith(needle) or needle in base for needle in _ENGLISH_ONLY)
