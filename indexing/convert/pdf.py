"""PDF: the text layer, page by page, through PDFium (pypdfium2; Apache-2.0/BSD). A page marker
line before each page; ligatures (ﬁ) are unfolded; a word hyphenated at a line's end is joined,
unless the document says it is a compound (`join_hyphenated`)."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import unicodedata
from collections import Counter

from indexing.convert import ConversionRefused, Converted, Limits, marker, require, unit_read

# A hyphen at a line's end: PDFium reports it as \x02 and drops the line break (a "soft" hyphen),
# or, in some files, as "-" before the break.
_HYPHENATED = re.compile(r"(?<!\w)(\w+)(?:\x02[ \t]*\n?|-[ \t]*\n)[ \t]*(\w+)")
_WORD = re.compile(r"\w+")
_COMPOUND = re.compile(r"(?<!\w)\w+(?:-\w+)+")
_LIGATURES = {c: unicodedata.normalize("NFKC", c) for c in "\ufb00\ufb01\ufb02\ufb03\ufb04\ufb05\ufb06"}
_LIGATURE_RE = re.compile("[" + "".join(_LIGATURES) + "]")
# A line that would read as a heading or as a page marker is escaped: a PDF line is a visual line.
_LOOKS_STRUCTURAL = re.compile(r"^(\s*)(#|\[(?:page|slide|sheet|chapter) )", re.M)
_TRAILING_SPACE = re.compile(r"[ \t]+$", re.M)


class Vocabulary:
    """The words of a document, and its hyphenated pairs (`well-known`), counted where no line
    break splits them: what says whether `well-⏎known` is one word broken or a compound."""

    def __init__(self, texts: list[str]):
        self.words: Counter = Counter()
        self.pairs: Counter = Counter()
        for text in texts:
            whole = _HYPHENATED.sub(" ", _normalized(text)).lower()
            self.words.update(_WORD.findall(whole))
            for compound in _COMPOUND.findall(whole):
                parts = compound.split("-")
                self.pairs.update(f"{a}-{b}" for a, b in zip(parts, parts[1:]))

    def keeps_hyphen(self, left: str, right: str) -> bool:
        """Keep the hyphen when the joined word is not more common in the document than the
        hyphenated form (`well-known` over `wellknown`), between digits (`64-bit`, `34.11-2012`),
        and, when the document has neither form, when both halves are words of it that are more
        than a syllable (`fog-bound`, not `con-sidered`)."""
        if left[-1].isdigit() or right[0].isdigit():
            return True
        left, right = left.lower(), right.lower()
        joined, hyphenated = self.words[left + right], self.pairs[f"{left}-{right}"]
        if joined or hyphenated:
            return hyphenated >= joined
        return min(len(left), len(right)) > 3 and self.words[left] > 0 and self.words[right] > 0


def _normalized(raw: str) -> str:
    text = raw.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "").replace("\ufffe", "")
    return _LIGATURE_RE.sub(lambda m: _LIGATURES[m.group()], text)


def join_hyphenated(text: str, vocabulary: Vocabulary) -> str:
    return _HYPHENATED.sub(
        lambda m: (
            f"{m.group(1)}-{m.group(2)}" if vocabulary.keeps_hyphen(m.group(1), m.group(2)) else m.group(1) + m.group(2)
        ),
        text,
    )


def page_text(raw: str, vocabulary: Vocabulary | None = None) -> str:
    text = _normalized(raw)
    text = join_hyphenated(text, vocabulary or Vocabulary([text]))
    text = text.replace("\x02", "-")  # a soft hyphen elsewhere (not between two words)
    text = _TRAILING_SPACE.sub("", text)
    return _LOOKS_STRUCTURAL.sub(r"\1\\\2", text).strip()


def convert(data: bytes, limits: Limits) -> Converted:
    pdfium = require("pypdfium2", "pdf")
    try:
        doc = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        message = str(exc).lower()
        if "password" in message:
            raise ConversionRefused("password-protected (encrypted) PDF") from None
        raise ConversionRefused(f"not a readable PDF ({exc})") from None
    try:
        total = len(doc)
        pages = min(total, limits.max_pages)
        out: list[str] = []
        empty = 0
        ocr = ocr_command(limits)
        read_by_ocr = 0
        raw_pages = []
        for index in range(pages):
            page = doc[index]
            textpage = page.get_textpage()
            raw = textpage.get_text_bounded()
            textpage.close()
            if not raw.strip() and ocr:
                raw = ocr_page(page, ocr)
                read_by_ocr += bool(raw.strip())
            page.close()
            raw_pages.append(raw)
            unit_read(index + 1, pages)
        vocabulary = Vocabulary(raw_pages)  # the whole document's: a page is too few words
        for index, raw in enumerate(raw_pages):
            text = page_text(raw, vocabulary)
            if not text:
                empty += 1
            out.append(f"{marker('page', index + 1)}\n\n{text}\n")
        del raw_pages
        meta = doc.get_metadata_dict(skip_empty=True)
    finally:
        doc.close()
    warnings = []
    if total > pages:
        warnings.append(f"{total:,} pages: only the first {pages:,} read (PMD_CONVERT_MAX_PAGES)")
    if pages and empty == pages:
        why = (
            "OCR found no text either"
            if ocr
            else "OCR is off (PMD_OCR=off)"
            if limits.ocr == "off"
            else "OCR needs tesseract (Debian: apt install tesseract-ocr)"
        )
        raise ConversionRefused(f"no text layer on any of its {pages} page(s) (a scan?): {why}")
    if read_by_ocr:
        warnings.append(f"{read_by_ocr} of {pages} page(s) read by OCR (tesseract)")
    if empty:
        warnings.append(f"{empty} of {pages} page(s) have no text layer")
    return Converted(text="\n".join(out), units=pages, warnings=warnings, properties=_properties(meta))


OCR_DPI = 300


def ocr_command(limits: Limits) -> list[str] | None:
    """tesseract reading a PNG on its input, or None when OCR is off or tesseract is not installed."""
    if limits.ocr == "off":
        return None
    found = shutil.which("tesseract")
    if found is None:
        return None
    languages = re.sub(r"[^A-Za-z0-9_+]", "", limits.ocr_languages) or "eng"
    return [found, "stdin", "stdout", "-l", languages, "--psm", "3"]


def ocr_page(page, command: list[str]) -> str:
    """A page's text as tesseract reads its image (the child's time limit bounds it: it runs in the
    child's process group, which the parent stops whole)."""
    image = page.render(scale=OCR_DPI / 72).to_pil()
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    done = subprocess.run(command, input=buffer.getvalue(), capture_output=True, check=False)
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else ""


def _properties(meta: dict) -> dict:
    props: dict = {}
    if title := (meta.get("Title") or "").strip():
        props["title"] = title
    if author := (meta.get("Author") or "").strip():
        props["author"] = author
    keywords = [k.strip() for k in re.split(r"[,;]", meta.get("Keywords") or "") if k.strip()]
    if keywords:
        props["tags"] = keywords[:50]
    created = meta.get("CreationDate") or ""
    match = re.match(r"D:(\d{4})(\d{2})(\d{2})", created)
    if match:
        props["date"] = f"{match.group(1)}-{match.group(2)}-{match.group(3)}"
    return props
