"""Reads: the indexed section holding a line of a note, as the keyword index stored it (the
passages Ask gives the model)."""

from __future__ import annotations

from dataclasses import dataclass

from indexing.replicas import read_connection


@dataclass
class SectionText:
    """The indexed passage (a section, or a piece of a long one) holding a line, as stored text."""

    first_line: int  # 1-based line of the document where `text` starts
    text: str
    heading: str = ""  # the heading of the section a piece without its own belongs to


_SECTIONS_AT = """
SELECT w.i, pa.start_line, pa.start_char, pa.end_char, d.content_hash,
  CASE WHEN row_number() OVER (PARTITION BY d.content_hash ORDER BY w.i) = 1 THEN c.body END
FROM unnest(%s::text[], %s::text[], %s::int[]) WITH ORDINALITY AS w(coll, path, line, i)
JOIN indexing_collection co ON co.name = w.coll
JOIN indexing_document d ON d.collection_id = co.id AND d.path = w.path AND d.active
JOIN indexing_content c ON c.hash = d.content_hash
CROSS JOIN LATERAL (SELECT p.start_line, p.start_char, p.end_char FROM search_keyword_passage p
    WHERE p.document_id = d.id AND p.start_line <= greatest(w.line, 1) AND p.end_line >= w.line
    ORDER BY p.ordinal LIMIT 1) pa
"""


def sections_at(*, places: list[tuple[str, str, int]]) -> list[SectionText | None]:
    """Per (collection, path, line) already shown to the reader: the keyword index's passage holding
    that line (a section, or a piece of a long one, with its section's heading), or None when the
    document has no indexed passage there. One query; each body is read once however many hits it
    has, and cut here: Postgres finds a character offset by walking the UTF-8 string, costly in
    notebooks of many sections when Ask packs a dozen passages before the model's first token."""
    found: list[SectionText | None] = [None] * len(places)
    if not places:
        return found
    with read_connection().cursor() as cursor:
        cursor.execute(
            _SECTIONS_AT,
            [[c for c, _, _ in places], [p for _, p, _ in places], [max(1, int(n or 1)) for _, _, n in places]],
        )
        rows = cursor.fetchall()
    bodies = {content: body for *_, content, body in rows if body is not None}
    for index, first, start, end, content, _ in rows:
        body = bodies[content]
        text = body[start:end]
        heading = ""
        if start > 0 and not text.lstrip(" ").startswith("#"):  # a piece of a long section: the heading above it
            above = body.rfind("\n#", 0, start) + 1 or (0 if body.startswith("#") else -1)
            if above >= 0:
                end_of_line = body.find("\n", above, start)
                heading = body[above : end_of_line if end_of_line >= 0 else start]
        found[index - 1] = SectionText(first_line=first, text=text, heading=heading.rstrip("\r"))
    return found
