"""Word (DOCX) through python-docx (MIT): paragraphs and tables in document order, headings from
the heading styles, list items from the list styles, the core properties as frontmatter."""

from __future__ import annotations

import io
import re

from indexing.convert import ConversionRefused, Converted, Limits, require
from indexing.convert.tables import core_properties, markdown_table
from indexing.convert.zipcheck import zip_checked

_HEADING = re.compile(r"^(?:heading|überschrift|titre|título)\s*(\d)$", re.I)


def paragraph_markdown(paragraph) -> str:
    text = paragraph.text.strip()
    if not text:
        return ""
    style = (paragraph.style.name if paragraph.style is not None else "") or ""
    if style.lower() == "title":
        return f"# {text}"
    match = _HEADING.match(style)
    if match:
        return f"{'#' * min(int(match.group(1)) + (0 if match.group(1) != '0' else 1), 6)} {text}"
    # python-docx has no public word for a list paragraph's numbering: read its XML element.
    numbered = paragraph._p.pPr is not None and paragraph._p.pPr.numPr is not None  # noqa: SLF001 - see above
    if "list number" in style.lower():
        return f"1. {text}"
    if "list" in style.lower() or numbered:
        return f"- {text}"
    return text


def convert(data: bytes, limits: Limits) -> Converted:
    zip_checked(data, limits, "DOCX")
    docx = require("docx", "docx")
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - python-docx raises whatever lxml or zipfile raise
        raise ConversionRefused(f"not a readable DOCX file ({type(exc).__name__}: {str(exc)[:120]})") from None
    from docx.table import Table  # noqa: PLC0415 - python-docx is the optional extra `formats`

    blocks: list[str] = []
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            rows = [[cell.text for cell in row.cells] for row in item.rows]
            block = markdown_table(rows)
        else:
            block = paragraph_markdown(item)
        if block:
            blocks.append(block)
    props = core_properties(document.core_properties)
    return Converted(text="\n\n".join(blocks) + "\n", units=1, properties=props)
