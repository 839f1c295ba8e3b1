"""Markdown tables from rows of cells, shared by the DOCX, PPTX, XLSX and HTML converters."""

from __future__ import annotations


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
