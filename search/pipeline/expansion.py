"""Query expansion: typed variants of a query for the retrievers that suit them.

A short query misses documents that use other words. A small generate model
writes variants, each typed by where it goes:

* `lex`  - a keyword query for BM25 (exact terms, synonyms, spelled-out acronyms);
* `vec`  - a natural-language rephrasing for vector search;
* `hyde` - a hypothetical passage that a relevant document might contain
  ("HyDE"): it embeds closer to answers than the question does.

We ask for 1-3 lex, 1-3 vec and at most one hyde through the backend's structured
output (a JSON schema), but small models still add prose, code fences, thinking
blocks, untyped or repeated entries, so `parse_expansion` accepts all of that and
keeps only usable, distinct variants. Answers are cached in the LLM cache.

Users and agents can skip the model by writing the variants themselves, one per
line, in a *structured query document*::

    how do I tune autovacuum          <- plain lines: the query itself
    lex: autovacuum_vacuum_scale_factor
    vec: how to make postgres vacuum run more often
    hyde: Lower autovacuum_vacuum_scale_factor so that ...
    intent: PostgreSQL administration, not laundry
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

from indexing.errors import InvalidSearchInput
from indexing.models import LLMCache

LEX, VEC, HYDE = "lex", "vec", "hyde"
KINDS = (LEX, VEC, HYDE)
LIMITS = {LEX: 3, VEC: 3, HYDE: 1}
MAX_CHARS = {LEX: 120, VEC: 300, HYDE: 1200}
PROMPT_VERSION = "expand-v1"  # part of the cache key: a new prompt must not reuse old answers

_ALIASES = {
    "lex": LEX,
    "lexical": LEX,
    "keyword": LEX,
    "keywords": LEX,
    "bm25": LEX,
    "kw": LEX,
    "vec": VEC,
    "vector": VEC,
    "semantic": VEC,
    "dense": VEC,
    "paraphrase": VEC,
    "rephrase": VEC,
    "hyde": HYDE,
    "hypothetical": HYDE,
    "passage": HYDE,
    "answer": HYDE,
    "doc": HYDE,
    "document": HYDE,
}

EXPANSION_SCHEMA = {
    "type": "object",
    "properties": {
        "variants": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": list(KINDS)},
                    "text": {"type": "string"},
                },
                "required": ["type", "text"],
            },
            "minItems": 2,
            "maxItems": 7,
        }
    },
    "required": ["variants"],
}

EXPANSION_SYSTEM = (
    "You help a search engine over a personal markdown knowledge base find documents. "
    "You rewrite a search query into typed search variants and answer with JSON only."
)

_EXPANSION_TEMPLATE = """Search query: {query}
{intent_line}
Write search variants for this query:
- "lex": 1 to 3 keyword queries for a BM25 index: 2-6 words each, key terms, synonyms, acronyms and their expansions.
- "vec": 1 to 3 rephrasings of the whole question in natural language, for semantic search.
- "hyde": at most 1 short passage (2-3 sentences) written as a relevant document would state the answer.
Stay on the topic of the query; do not repeat the query verbatim; do not invent facts about names you do not know.
Answer as JSON: {{"variants": [{{"type": "lex", "text": "..."}}, {{"type": "vec", "text": "..."}}, \
{{"type": "hyde", "text": "..."}}]}}"""


@dataclass(frozen=True)
class QueryVariant:
    kind: str  # lex | vec | hyde
    text: str

    def as_dict(self) -> dict:
        return {"type": self.kind, "text": self.text}


@dataclass
class QueryPlan:
    """What the retrievers will be asked: the user's own text plus typed variants."""

    original: str | None  # plain query text: both retrievers, weight 2×
    variants: list[QueryVariant] = field(default_factory=list)
    intent: str | None = None
    source: str = "none"  # none | user (structured document) | model | cache
    warnings: list[str] = field(default_factory=list)

    @property
    def rerank_query(self) -> str:
        """The question the re-ranker judges documents against."""
        if self.original:
            return self.original
        for kind in (VEC, LEX, HYDE):
            for variant in self.variants:
                if variant.kind == kind:
                    return variant.text
        return ""


# --- prompting ---------------------------------------------------------------------


def expansion_prompt(query: str, intent: str | None = None) -> str:
    intent_line = (
        f"What the searcher means (use it to disambiguate): {intent.strip()}\n" if intent and intent.strip() else ""
    )
    return _EXPANSION_TEMPLATE.format(query=query.strip(), intent_line=intent_line)


def expansion_cache_key(*, query: str, intent: str | None, model: str) -> str:
    raw = "\x00".join([PROMPT_VERSION, model, query.strip(), (intent or "").strip()])
    return hashlib.sha256(raw.encode()).hexdigest()


def request_expansion(*, backend, model: str, query: str, intent: str | None = None) -> list[QueryVariant]:
    """Ask the generate model for variants (HTTP only, no database: safe in a worker thread)."""
    text = backend.generate(
        expansion_prompt(query, intent),
        model=model,
        system=EXPANSION_SYSTEM,
        format=EXPANSION_SCHEMA,
        options={"temperature": 0, "num_predict": 600},
        think=False,
    )
    return parse_expansion(text, query=query)


def cached_expansion(key: str) -> list[QueryVariant] | None:
    entry = LLMCache.objects.filter(key=key, kind="expand").first()
    if entry is None:
        return None
    try:
        return [QueryVariant(kind, text) for kind, text in entry.value["variants"] if kind in KINDS and text]
    except (KeyError, TypeError, ValueError):
        return None  # an entry we cannot read is as good as none


def store_expansion(key: str, variants: list[QueryVariant]) -> None:
    if not variants:
        return  # never cache a failure: the next try may do better
    LLMCache.objects.update_or_create(
        key=key, defaults={"kind": "expand", "value": {"variants": [[v.kind, v.text] for v in variants]}}
    )


# --- parsing model output ----------------------------------------------------------------

_THINK = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)
_FENCE = re.compile(r"```[\w-]*\s*\n?(.*?)```", re.S)
_TYPED_LINE = re.compile(r"^\s*(?:[-*•]|\d+[.)])?\s*\**\s*\"?([A-Za-z]+)\"?\s*\**\s*[:=]\s*(.+?)\s*$")
_WORDS = re.compile(r"\w+")


def parse_expansion(text: str, *, query: str = "") -> list[QueryVariant]:
    """Usable, distinct variants from whatever the model answered (possibly none)."""
    if not isinstance(text, str):
        return []
    text = _THINK.sub("", text).strip()
    raw: list[tuple[str | None, str]] = []
    data = _first_json(text)
    if data is not None:
        raw = _from_json(data)
    if not raw:
        raw = _from_lines(text)
    return _clean(raw, query=query)


def _first_json(text: str):
    """The first JSON object or array in the text (inside a code fence or not)."""
    blocks = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for block in blocks:
        block = block.strip()
        try:
            return json.loads(block)
        except ValueError:
            pass
        for match in re.finditer(r"[\[{]", block):
            try:
                value, _ = decoder.raw_decode(block, match.start())
            except ValueError:
                continue
            if isinstance(value, (dict, list)) and value:
                return value
    return None


def _from_json(data) -> list[tuple[str | None, str]]:
    if isinstance(data, dict):
        for name in ("variants", "queries", "expansions", "results", "items"):
            if isinstance(data.get(name), list):
                return _from_json(data[name])
        found: list[tuple[str | None, str]] = []
        for name, value in data.items():
            kind = _ALIASES.get(str(name).strip().lower())
            if kind is None:
                continue
            values = value if isinstance(value, list) else [value]
            found.extend((kind, v) for v in values if isinstance(v, str))
        if found:
            return found
        item = _from_item(data)
        return [item] if item else []
    if isinstance(data, list):
        items = []
        for entry in data:
            item = _from_item(entry)
            if item:
                items.append(item)
        return items
    return []


def _from_item(entry) -> tuple[str | None, str] | None:
    if isinstance(entry, str):
        typed = _typed_line(entry)
        return typed if typed else (None, entry)
    if not isinstance(entry, dict):
        return None
    kind_raw = next((entry[k] for k in ("type", "kind", "mode", "variant") if isinstance(entry.get(k), str)), None)
    text = next((entry[k] for k in ("text", "query", "content", "value", "q") if isinstance(entry.get(k), str)), None)
    if text is None:
        # {"lex": "..."} as a list item
        for name, value in entry.items():
            kind = _ALIASES.get(str(name).strip().lower())
            if kind and isinstance(value, str):
                return kind, value
        return None
    kind = _ALIASES.get(kind_raw.strip().lower()) if kind_raw else None
    if kind_raw and kind is None:
        return None  # a type we do not know: better dropped than guessed
    return kind, text


def _typed_line(line: str) -> tuple[str, str] | None:
    match = _TYPED_LINE.match(line)
    if not match:
        return None
    kind = _ALIASES.get(match.group(1).lower())
    return (kind, match.group(2)) if kind else None


def _from_lines(text: str) -> list[tuple[str | None, str]]:
    """`lex: ...` lines in free text; untyped prose lines are ignored."""
    return [typed for line in text.splitlines() if (typed := _typed_line(line))]


def _normalized(text: str) -> str:
    return " ".join(_WORDS.findall(text.casefold()))


def _tidy(text: str, kind: str) -> str:
    text = " ".join(text.split()).strip().strip("\"'`“”‘’").strip()
    limit = MAX_CHARS[kind]
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0]
    return text


def _guess_kind(text: str) -> str:
    words = len(_WORDS.findall(text))
    if words > 20:
        return HYDE
    if words <= 5:
        return LEX
    return VEC


def _clean(raw: list[tuple[str | None, str]], *, query: str) -> list[QueryVariant]:
    seen = {_normalized(query)} if query else set()
    counts = {kind: 0 for kind in KINDS}
    kept: list[QueryVariant] = []
    for kind, text in raw:
        if not isinstance(text, str):
            continue
        kind = kind or _guess_kind(text)
        text = _tidy(text, kind)
        key = _normalized(text)
        if not key or key in seen or counts[kind] >= LIMITS[kind]:
            continue
        seen.add(key)
        counts[kind] += 1
        kept.append(QueryVariant(kind, text))
    order = {kind: i for i, kind in enumerate(KINDS)}
    return sorted(kept, key=lambda v: order[v.kind])  # stable: model order within a kind


# --- structured query documents ----------------------------------------------------------

_DOC_LINE = re.compile(r"^\s*(lex|vec|hyde|intent)\s*:\s*(.*?)\s*$", re.I)


def is_query_document(text: str) -> bool:
    return any(_DOC_LINE.match(line) for line in text.splitlines())


def parse_query_document(text: str) -> QueryPlan | None:
    """A plan from a user-written `lex:/vec:/hyde:/intent:` document; None for a plain query.

    Plain lines form the query itself. Without plain lines, the written variants
    are all the user asked for, so they weigh like an original query (the caller
    decides weights; see `QueryPlan.original`).
    """
    if not is_query_document(text):
        return None
    plain: list[str] = []
    raw: list[tuple[str, str]] = []
    intents: list[str] = []
    warnings: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = _DOC_LINE.match(line)
        if not match:
            if line.strip():
                plain.append(line.strip())
            continue
        kind, value = match.group(1).lower(), match.group(2)
        if not value:
            warnings.append(f"structured query line {number} ({kind}:) is empty and was ignored")
            continue
        if kind == "intent":
            intents.append(value)
        else:
            raw.append((kind, value))
    return user_plan(" ".join(plain) or None, raw, intent=" ".join(intents) or None, warnings=warnings)


def user_plan(
    original: str | None, raw: list[tuple[str, str]], *, intent: str | None = None, warnings: list[str] | None = None
) -> QueryPlan:
    """The plan for variants the caller wrote (a query document's lines, or the MCP tool's typed searches)."""
    warnings = list(warnings or [])
    variants = _clean(raw, query=original or "")
    dropped = len(raw) - len(variants)
    if dropped:
        warnings.append(
            f"{dropped} structured query line(s) were dropped (duplicates, or more than "
            f"{LIMITS[LEX]} lex / {LIMITS[VEC]} vec / {LIMITS[HYDE]} hyde)"
        )
    if not original and not variants:
        raise InvalidSearchInput(
            "the structured query has no text to search for: add a plain line or lex:/vec:/hyde: lines"
        )
    return QueryPlan(original=original, variants=variants, intent=intent, source="user", warnings=warnings)
