"""PowerPoint (PPTX) through python-pptx (MIT): a marker per slide, its title as a heading, its
text frames, tables and speaker notes."""

from __future__ import annotations

import io

from indexing.convert import ConversionRefused, Converted, Limits, marker, require, unit_read
from indexing.convert.tables import core_properties, markdown_table
from indexing.convert.zipcheck import zip_checked


def _shape_blocks(shape, title_shape) -> list[str]:
    blocks = []
    if shape.shape_type is not None and getattr(shape, "shapes", None) is not None:  # a group
        for inner in shape.shapes:
            blocks += _shape_blocks(inner, title_shape)
        return blocks
    if title_shape is not None and shape.shape_id == title_shape.shape_id:
        return blocks
    if getattr(shape, "has_table", False) and shape.has_table:
        blocks.append(markdown_table([[cell.text for cell in row.cells] for row in shape.table.rows]))
    elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        lines = []
        for paragraph in shape.text_frame.paragraphs:
            text = "".join(run.text for run in paragraph.runs).strip()
            if text:
                lines.append(
                    ("  " * paragraph.level) + "- " + text
                    if paragraph.level or len(shape.text_frame.paragraphs) > 1
                    else text
                )
        if lines:
            blocks.append("\n".join(lines))
    return blocks


def convert(data: bytes, limits: Limits) -> Converted:
    zip_checked(data, limits, "PPTX")
    pptx = require("pptx", "pptx")
    try:
        presentation = pptx.Presentation(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - python-pptx raises whatever lxml or zipfile raise
        raise ConversionRefused(f"not a readable PPTX file ({type(exc).__name__}: {str(exc)[:120]})") from None
    slides = list(presentation.slides)
    out = []
    for number, slide in enumerate(slides[: limits.max_pages], start=1):
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text.strip() if title_shape is not None and title_shape.has_text_frame else ""
        parts = [marker("slide", number), f"## {' '.join(title.split())}" if title else ""]
        for shape in slide.shapes:
            parts += _shape_blocks(shape, title_shape)
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame.text.strip() if slide.notes_slide.notes_text_frame else ""
            if notes:
                parts.append("Notes: " + notes)
        out.append("\n\n".join(p for p in parts if p))
        unit_read(number, min(len(slides), limits.max_pages))
    warnings = []
    if len(slides) > limits.max_pages:
        warnings.append(f"{len(slides):,} slides: only the first {limits.max_pages:,} read (PMD_CONVERT_MAX_PAGES)")
    props = core_properties(presentation.core_properties)
    return Converted(
        text="\n\n".join(out) + "\n", units=min(len(slides), limits.max_pages), warnings=warnings, properties=props
    )
