"""PDF: the text layer, page by page, through PDFium (pypdfium2; Apache-2.0/BSD). A page marker
line before each page; ligatures (ﬁ) are unfolded; a word hyphenated at a line's end is joined."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import unicodedata

from indexing.convert import ConversionRefused, Converted, Limits, marker, require

_HYPHENATED = re.compile(r"(\w)-\n(\w)")
_LIGATURES = {c: unicodedata.normalize("NFKC", c) for c in "\ufb00\ufb01\ufb02\ufb03\ufb04\ufb05\ufb06"}
_LIGATURE_RE = re.compile("[" + "".join(_LIGATURES) + "]")
# A line that would read as a heading or as a page marker is escaped: a PDF line is a visual line.
_LOOKS_STRUCTURAL = re.compile(r"^(\s*)(#|\[(?:page|slide|sheet|chapter) )", re.M)
_TRAILING_SPACE = re.compile(r"[ \t]+$", re.M)


def page_text(raw: str) -> str:
    text = raw.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "").replace("\ufffe", "")
    text = _LIGATURE_RE.sub(lambda m: _LIGATURES[m.group()], text).replace("\x02", "-")  # \x02: a soft hyphen
    text = _HYPHENATED.sub(r"\1\2", text)
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
        for index in range(pages):
            page = doc[index]
            textpage = page.get_textpage()
            text = page_text(textpage.get_text_bounded())
            textpage.close()
            if not text and ocr:
                text = page_text(ocr_page(page, ocr))
                read_by_ocr += bool(text)
            page.close()
            if not text:
                empty += 1
            out.append(f"{marker('page', index + 1)}\n\n{text}\n")
        meta = doc.get_metadata_dict(skip_empty=True)
    finally:
        doc.close()
    warnings = []
    if total > pages:
        warnings.append(f"{total:,} pages: only the first {pages:,} read (PMD_CONVERT_MAX_PAGES)")
    if pages and empty == pages:
        why = ("OCR found no text either" if ocr else
               "OCR is off (PMD_OCR=off)" if limits.ocr == "off" else
               "OCR needs tesseract (Debian: apt install tesseract-ocr)")
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
