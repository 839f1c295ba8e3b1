"""Filters in SQL: the one builder keyword, vector and hybrid search (and the filter-only list) use.

`filter_sql(filters, "d")` is a ` AND …` fragment over a row `d` of indexing_document, with its
parameters (positional `%s`): each search puts it where it already restricts documents to the
active ones of the searched collections, so filtering happens inside retrieval and `-n 10`
gives ten matching results. Every condition can use an index of the documents table:

- tags: `d.tags_with_parents && ARRAY[…]` (GIN), exclusions `NOT (… && …)`: a tag also matches
  the notes tagged below it (`tag:project` holds for `project/x`, as Obsidian nests tags);
- path globs: `d.path ~ ANY(regexes)` (search.filters.glob_to_regex), anchored, case-sensitive,
  after `d.path LIKE 'literal start%'` when every glob of the group has one (btree, pattern ops);
- dates: `d.note_date >= after`, `d.note_date < before` (btree); a note without a date has none;
- frontmatter fields: `d.frontmatter @> ANY(ARRAY['{"k": v}', '{"k": [v]}', …]::jsonb[])` (GIN
  jsonb_path_ops): the value, or a list holding it, under each spelling of the key in the index;
  a string value also as lower/upper/capitalised/title case, a number or boolean also typed.

Access is never widened: these fragments only narrow what collection_ids_for already allows.
"""

from __future__ import annotations

import json
import re
import time

from indexing.models import Collection, PathContext
from indexing.replicas import read_connection
from indexing.selectors import contexts_for
from search.filters import FieldFilter, SearchFilters, glob_to_regex
from search.results import SearchResponse, SearchResult
from search.retrieval.common import SNIPPET_CHARS, collection_ids_for, request_access

_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")
_TRUE = {"true", "yes", "on"}
_FALSE = {"false", "no", "off"}


def filter_sql(filters: SearchFilters | None, alias: str = "d") -> tuple[str, list]:
    """(' AND …' over `alias`, params); ('', []) without filters."""
    if filters is None or filters.empty:
        return "", []
    parts: list[str] = []
    params: list = []
    for group in filters.tags:
        parts.append(f"{alias}.tags_with_parents && %s::varchar[]")
        params.append(list(group))
    if filters.exclude_tags:
        parts.append(f"NOT ({alias}.tags_with_parents && %s::varchar[])")
        params.append(list(filters.exclude_tags))
    for group in filters.paths:
        prefixes = [glob_prefix(g) for g in group]
        if all(prefixes):  # a literal start narrows through the path index before the pattern is read
            parts.append("(" + " OR ".join(f"{alias}.path LIKE %s" for _ in prefixes) + ")")
            params.extend(_like_escape(p) + "%" for p in prefixes)
        parts.append(f"{alias}.path ~ ANY(%s::text[])")
        params.append([glob_to_regex(g) for g in group])
    if filters.exclude_paths:
        parts.append(f"NOT ({alias}.path ~ ANY(%s::text[]))")
        params.append([glob_to_regex(g) for g in filters.exclude_paths])
    if filters.after is not None:
        parts.append(f"{alias}.note_date >= %s")
        params.append(filters.after)
    if filters.before is not None:
        parts.append(f"{alias}.note_date < %s")
        params.append(filters.before)
    for entry in filters.fields:
        sql, values = field_condition(entry, alias)
        parts.append(sql)
        params.extend(values)
    for entry in filters.exclude_fields:
        sql, values = field_condition(entry, alias)
        parts.append(f"NOT coalesce({sql}, false)")
        params.extend(values)
    for group in filters.any_of:  # one of the alternatives holds
        alternatives = []
        for alternative in group:
            sql, values = filter_sql(alternative, alias)
            alternatives.append("(true" + sql + ")")
            params.extend(values)
        parts.append("(" + " OR ".join(alternatives) + ")")
    return "".join(f" AND {p}" for p in parts), params


_SQL_OPERATORS = {">=": ">=", ">": ">", "<": "<", "<=": "<="}
_NUMERIC_TEXT = r"^\s*-?[0-9]+(\.[0-9]+)?\s*$"


def field_condition(entry: FieldFilter, alias: str = "d") -> tuple[str, list]:
    """A frontmatter condition: the value (GIN containment), the key's presence, or a range on a number
    or an ISO date (YYYY-MM-DD…, compared as its day), under any spelling of the key."""
    keys = list(entry.keys or dict.fromkeys([entry.key, entry.key.lower()]))
    if entry.has:
        return f"({alias}.frontmatter ?| %s::text[])", [keys]
    if not entry.bounds:
        return f"{alias}.frontmatter @> ANY(%s::jsonb[])", [field_documents(entry)]
    per_key, params = [], []
    numeric = all(_NUMBER.match(value) for _, value in entry.bounds)
    for key in keys:
        if numeric:
            value = (
                f"(CASE WHEN jsonb_typeof({alias}.frontmatter->%s) = 'number' THEN ({alias}.frontmatter->>%s)::numeric"
                f" WHEN {alias}.frontmatter->>%s ~ %s THEN trim({alias}.frontmatter->>%s)::numeric END)"
            )
            value_params = [key, key, key, _NUMERIC_TEXT, key]
        else:
            value = (
                f"(CASE WHEN {alias}.frontmatter->>%s ~ '^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}'"
                f" THEN left({alias}.frontmatter->>%s, 10) END)"
            )
            value_params = [key, key]
        conditions = []
        for op, bound in entry.bounds:
            conditions.append(f"{value} {_SQL_OPERATORS[op]} %s" + ("::numeric" if numeric else ""))
            params.extend(value_params + [bound if numeric else bound[:10]])
        per_key.append("(" + " AND ".join(conditions) + ")")
    return "(" + " OR ".join(per_key) + ")", params


def glob_prefix(pattern: str) -> str:
    """The literal start of a path glob, before its first wildcard: every matching path starts
    with it ('' when the glob starts with one)."""
    for n, ch in enumerate(pattern):
        if ch in "*?[{\\":
            return pattern[:n]
    return pattern.rstrip("/")


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def narrows_by_index(filters: SearchFilters | None) -> bool:
    """The filters hold a condition an index of the documents answers (a tag, a field value, a
    date bound, a path glob with a literal start): the matching documents are cheap to list.
    Otherwise (only exclusions, or globs starting with a wildcard) every document would be read
    to list them, and searches test the filter on their candidates instead."""
    if filters is None or filters.empty:
        return False
    return bool(
        filters.tags
        or any(not (f.has or f.bounds) for f in filters.fields)
        or filters.after is not None
        or filters.before is not None
        or any(all(glob_prefix(g) for g in group) for group in filters.paths)
    )


def named(sql: str, params: list, prefix: str = "f") -> tuple[str, dict]:
    """The fragment with `%(prefix_i)s` placeholders, for statements written with named ones."""
    out, values, i = [], {}, 0
    pieces = sql.split("%s")
    for n, piece in enumerate(pieces):
        out.append(piece)
        if n < len(pieces) - 1:
            name = f"{prefix}{i}"
            out.append(f"%({name})s")
            values[name] = params[i]
            i += 1
    return "".join(out), values


def value_variants(value: str) -> list:
    """The JSON values a written value stands for: the text in a few cases, a number, a boolean."""
    text = str(value)
    out: list = list(dict.fromkeys([text, text.lower(), text.upper(), text.capitalize(), text.title()]))
    if _NUMBER.match(text):
        number = float(text)
        out.append(int(number) if number.is_integer() and "." not in text else number)
    low = text.lower()
    if low in _TRUE:
        out.append(True)
    elif low in _FALSE:
        out.append(False)
    return out


def field_documents(entry: FieldFilter) -> list[str]:
    """The jsonb documents one of which a note's frontmatter must contain for `entry` to hold."""
    keys = entry.keys or tuple(dict.fromkeys([entry.key, entry.key.lower()]))
    docs = []
    for key in keys:
        for value in entry.values:
            for variant in value_variants(value):
                docs.append(json.dumps({key: variant}, ensure_ascii=False))
                docs.append(json.dumps({key: [variant]}, ensure_ascii=False))
    return list(dict.fromkeys(docs))


def frontmatter_keys(words: dict[str, list[str]], collection_ids: list[int] | None) -> dict[str, list[str]]:
    """Of `words` (lower case, each with the values asked for), those that are frontmatter keys of
    an active document in the collections (None: all), with their spellings in the index:
    {'status': ['Status', 'status']}.

    First, cheaply through the GIN index: which usual spellings of the key (as written, lower,
    Capitalised, UPPER) hold one of the values in some note; those are the spellings the filter
    needs. Only a word none of them matches costs a scan of the notes' keys, to tell a key whose
    value no note has (a filter that matches nothing) from a word no note has as a key (text)."""
    if not words or collection_ids == []:
        return {}
    where, scope = "", []
    if collection_ids is not None:
        where, scope = " AND d.collection_id = ANY(%s::bigint[])", [collection_ids]
    found: dict[str, list[str]] = {}
    with read_connection().cursor() as cursor:
        for word, values in words.items():
            spellings = list(dict.fromkeys([word, word.capitalize(), word.upper(), word.title()]))
            entries = [FieldFilter(key=word, values=list(values) or [""], keys=(s,)) for s in spellings]
            cursor.execute(
                "SELECT s.i FROM unnest(%s::int[]) s(i) WHERE EXISTS (SELECT 1 FROM indexing_document d"
                " WHERE d.active" + where + " AND d.frontmatter @> ANY((%s::jsonb[][])[s.i:s.i]))",
                [list(range(1, len(entries) + 1)), *scope, _rectangular([field_documents(e) for e in entries])],
            )
            hits = sorted(i for (i,) in cursor.fetchall())
            if hits:
                found[word] = sorted(spellings[i - 1] for i in hits)
        rest = sorted(set(words) - set(found))
        if rest:
            cursor.execute(
                "SELECT DISTINCT k FROM indexing_document d CROSS JOIN LATERAL jsonb_object_keys("
                "CASE WHEN jsonb_typeof(d.frontmatter) = 'object' THEN d.frontmatter ELSE '{}'::jsonb END) k"
                " WHERE lower(k) = ANY(%s::text[]) AND d.active AND d.frontmatter <> '{}'::jsonb" + where,
                [rest, *scope],
            )
            for (key,) in cursor.fetchall():
                found.setdefault(key.lower(), []).append(key)
    return {k: sorted(v) for k, v in found.items()}


def _rectangular(rows: list[list[str]]) -> list[list[str]]:
    """A 2-D array for PostgreSQL (rows of one length): short rows repeat their last document."""
    width = max(len(r) for r in rows)
    return [r + [r[-1]] * (width - len(r)) for r in rows]


def fields_resolved(filters: SearchFilters, collection_ids: list[int] | None) -> tuple[SearchFilters, list[str]]:
    """Structured field filters with their keys' spellings in the index, and a warning for a key
    no visible note has (the filter stays: it matches nothing)."""
    pending = [f for f in filters.all_fields() if not f.keys]
    if not pending:
        return filters, []
    asked: dict[str, list[str]] = {}
    for entry in pending:
        asked.setdefault(entry.key.lower(), []).extend(entry.values if not (entry.has or entry.bounds) else [])
    found = frontmatter_keys(asked, collection_ids)
    warnings = []
    for entry in pending:
        spellings = found.get(entry.key.lower())
        if spellings:
            entry.keys = tuple(spellings)
        else:
            entry.keys = (entry.key,)
            message = f"no notes have a field '{entry.key}'"
            if message not in warnings:
                warnings.append(message)
    return filters, warnings


def documents_where(filters: SearchFilters, collection_ids: list[int] | None) -> tuple[str, list]:
    """The conditions (after `WHERE d.active`) on documents `d` of the collections passing the filters."""
    fragment, params = filter_sql(filters, "d")
    if collection_ids is None:
        return fragment, params
    return " AND d.collection_id = ANY(%s::bigint[])" + fragment, [collection_ids, *params]


def matching_count(filters: SearchFilters, collection_ids: list[int] | None, *, cap: int) -> int:
    """How many active documents of the collections pass the filters, counted up to `cap`."""
    if collection_ids == []:
        return 0
    where, params = documents_where(filters, collection_ids)
    with read_connection().cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM (SELECT 1 FROM indexing_document d WHERE d.active" + where + " LIMIT %s) s",
            [*params, int(cap)],
        )
        return int(cursor.fetchone()[0])


# --- a query of filters only: the matching notes, newest first ------------------------------------

LIST_SNIPPET_CHARS = 4000  # of the body read for a listed note's snippet


def filtered_notes(request, filters: SearchFilters) -> SearchResponse:
    """The notes passing `filters` (no words to rank by), newest first (undated last, then by
    path): what `tag:meeting after:"last week"` alone lists, in every mode."""
    started = time.perf_counter()
    response = SearchResponse(query=request.query, mode=request.mode)
    collection_ids = collection_ids_for(request.collections, request_access(request))
    if collection_ids == []:
        return response
    where, params = documents_where(filters, collection_ids)
    with read_connection().cursor() as cursor:
        cursor.execute(
            "SELECT d.docid, d.collection_id, d.path, d.title, d.note_date, d.date_source,"
            " CASE WHEN %s THEN c.body ELSE substr(c.body, 1, %s) END"
            " FROM indexing_document d JOIN indexing_content c ON c.hash = d.content_hash"
            " WHERE d.active" + where + " ORDER BY d.note_date DESC NULLS LAST, d.collection_id, d.path LIMIT %s",
            [bool(request.full), LIST_SNIPPET_CHARS, *params, request.effective_limit()],
        )
        rows = cursor.fetchall()
    response.timings["list"] = (time.perf_counter() - started) * 1000
    collections = {c.pk: c for c in Collection.objects.filter(pk__in={r[1] for r in rows})}
    all_contexts = list(PathContext.objects.all())
    for docid, collection_id, path, title, note_date, date_source, body in rows:
        collection = collections[collection_id]
        line, snippet = _opening(body or "")
        response.results.append(
            SearchResult(
                docid=docid,
                collection=collection.name,
                path=path,
                title=title,
                score=1.0,
                line=line,
                snippet=snippet,
                context=contexts_for(collection, path, all_contexts=all_contexts),
                body=body if request.full else None,
                scores={"filter": 1.0},
                date=note_date.isoformat() if note_date else None,
                date_source=date_source or "",
            )
        )
    return response


def _opening(body: str) -> tuple[int, str]:
    """(line, text) of a note's first lines of prose: after the frontmatter and the title heading."""
    lines = body.split("\n")
    start = 0
    if lines and lines[0].strip() == "---":
        for n in range(1, len(lines)):
            if lines[n].strip() in ("---", "..."):
                start = n + 1
                break
    taken, size, first = [], 0, None
    for n in range(start, len(lines)):
        text = lines[n].strip()
        if not text or (first is None and text.startswith("#") and not taken):
            if taken:
                break
            continue
        if first is None:
            first = n + 1
        piece = text[: SNIPPET_CHARS - size]
        taken.append(piece)
        size += len(piece) + 1
        if size >= SNIPPET_CHARS or len(taken) >= 4:
            break
    return (first or 1), "\n".join(taken)


# --- field discovery: the frontmatter keys a searcher can filter by ---------------------------------

TOP_VALUES = 5
_ISO_DATE_TEXT = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}"


def frontmatter_fields(*, access, collections: list[str] | None = None, top: int = TOP_VALUES) -> list[dict]:
    """The frontmatter keys of the active notes the searcher sees (in `collections`), most used first:
    {key, types (number, date, text, boolean, list, object: as many notes), notes, values: the `top`
    most frequent values (a list's items count one by one) with their counts}. What `pmd fields`,
    /api/fields and the MCP tool show, and what the web box completes from."""
    collection_ids = collection_ids_for(collections or [], access)
    if collection_ids == []:
        return []
    where, scope = "", []
    if collection_ids is not None:
        where, scope = " AND d.collection_id = ANY(%s::bigint[])", [collection_ids]
    source = (
        "FROM indexing_document d CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(d.frontmatter) = 'object'"
        " THEN d.frontmatter ELSE '{}'::jsonb END) e(k, v)"
    )
    condition = " WHERE d.active AND d.frontmatter <> '{}'::jsonb" + where
    entries = source + condition
    with read_connection().cursor() as cursor:
        cursor.execute(
            "SELECT e.k, CASE jsonb_typeof(e.v) WHEN 'string' THEN"
            " CASE WHEN e.v #>> '{}' ~ %s THEN 'date' ELSE 'text' END"
            " WHEN 'array' THEN 'list' ELSE jsonb_typeof(e.v) END AS t, count(*) " + entries + " GROUP BY 1, 2",
            [_ISO_DATE_TEXT, *scope],
        )
        types: dict[str, dict[str, int]] = {}
        for key, kind, count in cursor.fetchall():
            types.setdefault(key, {})[kind] = int(count)
        cursor.execute(
            "SELECT k, val, n FROM (SELECT k, val, count(*) AS n,"
            " row_number() OVER (PARTITION BY k ORDER BY count(*) DESC,"
            " val) AS r FROM (SELECT e.k, x.val " + source + " CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(e.v)"
            " = 'array' THEN a.value #>> '{}' ELSE e.v #>> '{}' END AS val FROM jsonb_array_elements(CASE WHEN"
            " jsonb_typeof(e.v) = 'array' THEN e.v ELSE jsonb_build_array(e.v) END) a) x"
            + condition
            + " AND jsonb_typeof(e.v) <> 'object'"
            " AND x.val IS NOT NULL AND length(x.val) <= 200) s GROUP BY k, val) t"
            " WHERE r <= %s ORDER BY k, n DESC, val",
            [*scope, int(top)],
        )
        values: dict[str, list[dict]] = {}
        for key, value, count in cursor.fetchall():
            values.setdefault(key, []).append({"value": value, "notes": int(count)})
    out = [
        {
            "key": key,
            "notes": sum(kinds.values()),
            "types": dict(sorted(kinds.items(), key=lambda kv: -kv[1])),
            "values": values.get(key, []),
        }
        for key, kinds in types.items()
    ]
    return sorted(out, key=lambda f: (-f["notes"], f["key"].lower()))
