"""What the web search box offers while a filter is typed: the filter keys (built-in and the
notes' frontmatter keys, as `pmd fields` lists them), tags (most used first, as the tag facets count
them) and a key's most frequent values. Only the last piece of the box is completed; the rest stays.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from indexing.replicas import read_connection
from search.retrieval.common import collection_ids_for
from search.retrieval.filters import frontmatter_fields

SUGGESTIONS = 8
# The keys of the filter language that are not frontmatter keys (search.filters), with what they take.
BUILT_IN_KEYS = {
    "tag": "a tag",
    "path": "a path glob",
    "after": "a date",
    "before": "a date",
    "has": "a frontmatter key",
    "type": "a file type",
    "date": "a date range",
}
_LAST = re.compile(r'(?:^|\s)(-?)([A-Za-z_][\w.-]*)(?::("?)([^\s"]*))?$')


@dataclass
class Suggestion:
    text: str  # the whole box with the last piece completed
    label: str  # what is shown (`tag:db`)
    hint: str  # what it is (a key's type, how many notes carry a tag)


def query_suggestions(
    *, access, text: str, collections: list[str] | None = None, limit: int = SUGGESTIONS
) -> list[Suggestion]:
    """Completions of the box's last piece: `ta` → the keys starting so; `tag:d` → tags; `status:dr` → values."""
    text = text or ""
    if not text or text[-1].isspace():
        return []
    match = _LAST.search(text)
    if match is None:
        return []
    negated, key, quoted, value = match.groups()
    head = text[: match.start(2) - len(negated)]
    if value is None:  # a key being typed
        if len(key) < 1:
            return []
        low = key.lower()
        keys = [(k, f"filter by {what}") for k, what in BUILT_IN_KEYS.items()]
        keys += [
            (f["key"], "field · " + ", ".join(f["types"]) + f" · {f['notes']} notes")
            for f in frontmatter_fields(access=access, collections=collections, top=0)
            if f["key"].lower() not in BUILT_IN_KEYS and re.fullmatch(r"[A-Za-z_][\w.-]*", f["key"])
        ]
        found = [(k, hint) for k, hint in keys if k.lower().startswith(low) and k.lower() != low]
        return [Suggestion(text=f"{head}{negated}{k}:", label=f"{negated}{k}:", hint=hint) for k, hint in found[:limit]]
    low_key, low = key.lower(), value.lower()
    if low_key in ("tag", "tags"):
        values = [(t, f"{n} note{'s' if n != 1 else ''}") for t, n in _tags(access, collections, low, limit)]
    elif low_key == "has":
        values = [
            (f["key"], f"{f['notes']} notes")
            for f in frontmatter_fields(access=access, collections=collections, top=0)
            if f["key"].lower().startswith(low)
        ]
    elif low_key in BUILT_IN_KEYS:
        return []
    else:
        fields = [f for f in frontmatter_fields(access=access, collections=collections) if f["key"].lower() == low_key]
        values = [
            (v["value"], f"{v['notes']} notes")
            for f in fields
            for v in f["values"]
            if v["value"].lower().startswith(low)
        ]
    out = []
    for v, hint in values[:limit]:
        shown = f'"{v}"' if re.search(r'[\s,"()]', v) or quoted else v
        out.append(Suggestion(text=f"{head}{negated}{key}:{shown}", label=f"{negated}{key}:{shown}", hint=hint))
    return [s for s in out if s.text != text]


def _tags(access, collections: list[str] | None, prefix: str, limit: int) -> list[tuple[str, int]]:
    """The tags starting with `prefix` of the notes the searcher sees, most used first."""
    ids = collection_ids_for(collections or [], access)
    if ids == []:
        return []
    scope, params = "", []
    if ids is not None:
        scope, params = " AND d.collection_id = ANY(%s::bigint[])", [ids]
    like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    with read_connection().cursor() as cursor:
        cursor.execute(
            "SELECT t, count(*) FROM indexing_document d CROSS JOIN LATERAL unnest(d.tags) t"
            " WHERE d.active" + scope + " AND lower(t) LIKE %s GROUP BY t ORDER BY count(*) DESC, t LIMIT %s",
            [*params, like, limit],
        )
        return [(t, int(n)) for t, n in cursor.fetchall()]
