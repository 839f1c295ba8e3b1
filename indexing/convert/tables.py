"""What the converters share: markdown tables from rows of cells (DOCX, PPTX, XLSX, HTML), the
Office files' core properties as frontmatter (DOCX, PPTX)."""

from __future__ import annotations

import re


def cell_text(value) -> str:
    text = "" if value is None else str(value)
    return " ".join(text.split()).replace("|", "\\|")


def markdown_table(rows: list[list], *, max_columns: int = 50) -> str:
    rows = [[cell_text(c) for c in row[:max_columns]] for row in rows]
    rows = [row for row in rows if any(row)]
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    rows = [row + [""] * (width - len(row)) for row in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(lines)


def core_properties(core) -> dict:
    """An Office file's title, author, keywords (as tags) and creation date."""
    props = {"title": (core.title or "").strip(), "author": (core.author or "").strip()}
    keywords = [k.strip() for k in re.split(r"[,;]", core.keywords or "") if k.strip()]
    if keywords:
        props["tags"] = keywords[:50]
    if core.created:
        props["date"] = core.created.date().isoformat()
    return props
