"""Files that are not markdown (PDF, Word, PowerPoint, Excel, HTML, EPUB, plain text), read as
markdown-like text so chunking, passages, links, tags, dates and snippets work unchanged.

Each format has a module with `convert(data: bytes, limits: Limits) -> Converted`; the registry
below maps a file name's extension to it. The libraries run outside the indexing process
(indexing.convert.sandbox), with a time and a memory limit: a broken or hostile file costs one
problem, never the scan. What a converter finds in the file's properties (title, author,
keywords, creation date) is written as frontmatter, so titles, tags and dates are read as a
note's. Pages, slides and sheets are marked by a line of their own (`[page 12]`): `locations`
reads them back, for results that point into the original and `get report.pdf:p12`.
"""

from __future__ import annotations

import importlib
import json
import posixpath
import re
from dataclasses import dataclass, field

from indexing.errors import InvalidGlob
from indexing.patterns import LazyPattern

# Bump when a converter's output changes: text stored under an older version is converted again.
CONVERTER_VERSION = 2

# format → the extensions it reads. "markdown" is read as today (indexing.text), never here.
FORMAT_EXTENSIONS: dict[str, tuple[str, ...]] = {
    "markdown": ("md", "markdown", "mdown", "mkd"),
    "pdf": ("pdf",),
    "docx": ("docx",),
    "pptx": ("pptx",),
    "xlsx": ("xlsx", "xlsm"),
    "html": ("html", "htm", "xhtml"),
    "epub": ("epub",),
    "text": ("txt", "text", "rst", "org"),
}
FORMATS = tuple(FORMAT_EXTENSIONS)
_FORMAT_OF_EXTENSION = {ext: fmt for fmt, exts in FORMAT_EXTENSIONS.items() for ext in exts}
# The module that converts each format (none for markdown and text: decoded in the indexing process).
_MODULES = {"pdf": "pdf", "docx": "docx", "pptx": "pptx", "xlsx": "xlsx", "html": "html", "epub": "epub"}
# What each format's marker lines name, and the anchor of a result that points at one.
UNIT_NAMES = {"pdf": "page", "pptx": "slide", "xlsx": "sheet", "epub": "chapter"}

MARKER_RE = LazyPattern(r"^\[(page|slide|sheet|chapter) ([^\]\n]{1,200})\]$", re.M)


class ConversionRefused(ValueError):
    """The file cannot be read as text: the reason is what the problem list shows."""


class MissingLibrary(ConversionRefused):
    """The library that reads this format is not installed (the `formats` extra)."""


@dataclass(frozen=True)
class Limits:
    """What one file may cost; from PMD_CONVERT_* (pmd_site settings), passed to the converter."""

    max_pages: int = 2000  # pages, slides, sheets or chapters read; the rest is left out, with a warning
    max_unzipped_bytes: int = 200 * 1024 * 1024  # DOCX/PPTX/XLSX/EPUB: their zip's members, uncompressed
    max_cells: int = 200_000  # XLSX: cells read over all sheets
    max_text_chars: int = 20_000_000  # text kept
    ocr: str = "auto"  # PDF pages without text: auto (read by tesseract when it is installed) or off
    ocr_languages: str = "eng"  # tesseract's -l: eng, deu+eng, …


@dataclass
class Converted:
    text: str  # markdown-like, with frontmatter from the file's properties and marker lines
    units: int = 0  # pages, slides, sheets or chapters read
    warnings: list[str] = field(default_factory=list)
    properties: dict = field(default_factory=dict)

    def markdown(self) -> str:
        """The text with the properties as frontmatter (title, author, tags, date)."""
        props = {k: v for k, v in self.properties.items() if v not in (None, "", [], ())}
        if not props:
            return self.text
        lines = ["---", *(f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in props.items()), "---", ""]
        return "\n".join(lines) + self.text


unit_hook = None  # set by the converting child (indexing.convert.child): where page progress goes


def unit_read(done: int, total: int) -> None:
    """A converter read `done` of `total` pages (slides, sheets, chapters): the child passes it on
    to the scan, so a long file's progress names its page; in any other process, nothing."""
    if unit_hook is not None:
        unit_hook(done, total)


def format_of(path: str) -> str:
    """The format a file is read as, by its extension; anything unknown is read as markdown (as before)."""
    ext = posixpath.splitext(path)[1].lower().lstrip(".")
    return _FORMAT_OF_EXTENSION.get(ext, "markdown")


def known_format(path: str) -> str | None:
    """The format pmd can read a file as, by its extension (None: an extension pmd does not know)."""
    return _FORMAT_OF_EXTENSION.get(posixpath.splitext(path)[1].lower().lstrip("."))


def formats_of_mask(mask: str) -> list[str] | None:
    """The formats besides markdown a mask selects when it is a formats mask (`**/*.{md,pdf}` →
    [pdf]); None for any other mask."""
    match = _FORMATS_MASK_RE.fullmatch(mask.strip())
    if not match:
        return None
    exts = (match.group(1) or match.group(2)).split(",")
    formats = []
    for ext in exts:
        fmt = _FORMAT_OF_EXTENSION.get(ext)
        if fmt is None:
            return None
        if fmt != "markdown" and fmt not in formats:
            formats.append(fmt)
    return formats


_FORMATS_MASK_RE = LazyPattern(r"\*\*/\*\.(?:\{([a-z0-9,]+)\}|([a-z0-9]+))")


def is_converted(path: str) -> bool:
    """Whether the file is read by a converter (in a subprocess) rather than as markdown text."""
    return format_of(path) in _MODULES


def formats_mask(formats: list[str] | str) -> str:
    """`pdf,docx` → `**/*.{md,pdf,docx}`: markdown always, and every extension of each format."""
    names = [f.strip().lower() for f in (formats.split(",") if isinstance(formats, str) else formats) if f.strip()]
    unknown = [n for n in names if n not in FORMAT_EXTENSIONS and n not in _FORMAT_OF_EXTENSION]
    if unknown:
        raise InvalidGlob(f"unknown format {', '.join(repr(u) for u in unknown)}: known are {', '.join(FORMATS)}")
    exts: list[str] = ["md"]
    for name in names:
        for ext in FORMAT_EXTENSIONS.get(name, (name,)):
            if ext not in exts:
                exts.append(ext)
    return "**/*." + ("{" + ",".join(exts) + "}" if len(exts) > 1 else exts[0])


def convert_here(fmt: str, data: bytes, limits: Limits) -> Converted:
    """Convert in this process (the sandbox's child calls it; tests may too)."""
    module_name = _MODULES.get(fmt)
    if module_name is None:
        raise ConversionRefused(f"no converter for {fmt}")
    module = importlib.import_module(f"indexing.convert.{module_name}")
    converted = module.convert(data, limits)
    if len(converted.text) > limits.max_text_chars:
        converted.text = converted.text[: limits.max_text_chars]
        converted.warnings.append(f"text cut at {limits.max_text_chars:,} characters")
    return converted


_LIBRARIES = {"pdf": ("pypdfium2",), "docx": ("docx",), "pptx": ("pptx",), "xlsx": ("openpyxl",)}


def preload(fmt: str) -> None:
    """Import a format's converter and its library (the child does before it limits its memory)."""
    if fmt in _MODULES:
        importlib.import_module(f"indexing.convert.{_MODULES[fmt]}")
    for library in _LIBRARIES.get(fmt, ()):
        try:
            importlib.import_module(library)
        except ImportError:
            pass  # said by `require` when the file is read


def require(module: str, fmt: str):
    """Import a converter's library, or say which extra brings it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingLibrary(
            f"reading {fmt.upper()} files needs the '{module.split('.')[0]}' library: "
            "install pmd with the formats extra (pip install 'pmd[formats]')"
        ) from None


@dataclass(frozen=True)
class Location:
    """Where a line of converted text lies in the original: `page 12`, `slide 3`, `sheet Budget`."""

    unit: str
    name: str

    @property
    def anchor(self) -> str:
        """The URI fragment: `page=12`, `slide=3`, `sheet=Budget`."""
        return f"{self.unit}={self.name}"

    def __str__(self) -> str:
        return f"{self.unit} {self.name}"


def location_at(body: str, line: int) -> Location | None:
    """The page (slide, sheet) the 1-based `line` of a converted text lies on, or None."""
    found = None
    offset_end = _line_offset(body, line)
    for match in MARKER_RE.finditer(body, 0, offset_end + 1):
        if match.start() > offset_end:
            break
        found = Location(match.group(1), match.group(2))
    return found


def _line_offset(body: str, line: int) -> int:
    pos = 0
    for _ in range(max(line - 1, 0)):
        nxt = body.find("\n", pos)
        if nxt == -1:
            return len(body)
        pos = nxt + 1
    return pos


def _unit_span(body: str, unit: str, name: str) -> tuple[int, int] | None:
    markers = list(MARKER_RE.finditer(body))
    for i, match in enumerate(markers):
        if match.group(1) == unit and match.group(2) == name:
            return match.start(), markers[i + 1].start() if i + 1 < len(markers) else len(body)
    return None


def unit_text(body: str, unit: str, name: str) -> str | None:
    """The text of one page (slide, sheet) of a converted text, marker included; None if it has none by that name."""
    span = _unit_span(body, unit, name)
    return None if span is None else body[span[0] : span[1]].rstrip() + "\n"


def unit_lines(body: str, unit: str, name: str) -> tuple[int, int] | None:
    """(first line, number of lines) of one page (slide, sheet) of a converted text, or None."""
    span = _unit_span(body, unit, name)
    if span is None:
        return None
    return body.count("\n", 0, span[0]) + 1, len(body[span[0] : span[1]].rstrip().splitlines())


def marker(unit: str, name) -> str:
    return f"[{unit} {name}]"
