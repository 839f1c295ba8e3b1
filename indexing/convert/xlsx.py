"""Excel (XLSX) through openpyxl (MIT), read-only: each sheet a marker, a heading and a markdown
table of its values, bounded (PMD_CONVERT_MAX_CELLS over the workbook; empty rows dropped)."""

from __future__ import annotations

import io

from indexing.convert import ConversionRefused, Converted, Limits, marker, require
from indexing.convert.tables import markdown_table
from indexing.convert.zipcheck import zip_checked

MAX_COLUMNS = 50


def convert(data: bytes, limits: Limits) -> Converted:
    zip_checked(data, limits, "XLSX")
    openpyxl = require("openpyxl", "xlsx")
    try:
        workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # noqa: BLE001 - openpyxl raises whatever lxml or zipfile raise
        raise ConversionRefused(f"not a readable XLSX file ({type(exc).__name__}: {str(exc)[:120]})") from None
    budget = limits.max_cells
    out, warnings = [], []
    sheets = workbook.worksheets
    for sheet in sheets[: limits.max_pages]:
        rows = []
        cut = False
        for row in sheet.iter_rows(values_only=True):
            if budget <= 0:
                cut = True
                break
            cells = list(row[:MAX_COLUMNS])
            while cells and cells[-1] is None:
                cells.pop()
            budget -= max(len(cells), 1)  # an empty row costs too: a sheet of a million of them ends
            if not cells:
                continue
            rows.append(["" if c is None else c for c in cells])
        if cut:
            warnings.append(f"sheet {sheet.title}: cut after {limits.max_cells:,} cells (PMD_CONVERT_MAX_CELLS)")
        out.append(
            f"{marker('sheet', sheet.title)}\n\n## {sheet.title}\n\n{markdown_table(rows, max_columns=MAX_COLUMNS)}"
        )
    workbook.close()
    if len(sheets) > limits.max_pages:
        warnings.append(f"{len(sheets)} sheets: only the first {limits.max_pages} read")
    props = workbook.properties
    meta = {"title": (props.title or "").strip(), "author": (props.creator or "").strip()}
    if props.created:
        meta["date"] = props.created.date().isoformat()
    return Converted(
        text="\n\n".join(out) + "\n", units=min(len(sheets), limits.max_pages), warnings=warnings, properties=meta
    )
