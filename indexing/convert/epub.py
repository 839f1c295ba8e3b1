"""EPUB with the standard library: the zip (bounded), its package file's reading order (spine),
each chapter's XHTML through the HTML reader, a marker per chapter. (ebooklib is AGPL: not used.)"""

from __future__ import annotations

import posixpath
import xml.etree.ElementTree as ET

from indexing.convert import ConversionRefused, Converted, Limits, marker
from indexing.convert.html import decode_html_bytes, html_markdown
from indexing.convert.zipcheck import zip_checked

_NS = {
    "c": "urn:oasis:names:tc:opendocument:xmlns:container",
    "opf": "http://www.idpf.org/2007/opf",
    "dc": "http://purl.org/dc/elements/1.1/",
}


def _xml(archive, name: str):
    try:
        # ElementTree expands no external entities; internal entity bombs are bounded by the zip limit
        return ET.fromstring(archive.read(name))
    except (KeyError, ET.ParseError) as exc:
        raise ConversionRefused(f"not a readable EPUB ({name}: {exc})") from None


def convert(data: bytes, limits: Limits) -> Converted:
    archive = zip_checked(data, limits, "EPUB")
    if (
        b"<!ENTITY" in archive.read("META-INF/container.xml")
        if "META-INF/container.xml" in archive.namelist()
        else False
    ):
        raise ConversionRefused("the EPUB's container declares XML entities: refused")
    container = _xml(archive, "META-INF/container.xml")
    rootfile = container.find(".//c:rootfile", _NS)
    if rootfile is None or not rootfile.get("full-path"):
        raise ConversionRefused("not a readable EPUB (no package file named in its container)")
    opf_path = rootfile.get("full-path")
    if b"<!ENTITY" in archive.read(opf_path):
        raise ConversionRefused("the EPUB's package file declares XML entities: refused")
    opf = _xml(archive, opf_path)
    base = posixpath.dirname(opf_path)
    manifest = {item.get("id"): item.get("href") for item in opf.findall(".//opf:manifest/opf:item", _NS)}
    spine = [ref.get("idref") for ref in opf.findall(".//opf:spine/opf:itemref", _NS)]
    out, warnings = [], []
    for number, idref in enumerate(spine[: limits.max_pages], start=1):
        href = manifest.get(idref)
        if not href:
            continue
        name = posixpath.normpath(posixpath.join(base, href.split("#")[0]))
        try:
            text, _ = html_markdown(decode_html_bytes(archive.read(name)))
        except KeyError:
            warnings.append(f"chapter {name} is missing from the EPUB")
            continue
        out.append(f"{marker('chapter', number)}\n\n{text}")
    if len(spine) > limits.max_pages:
        warnings.append(f"{len(spine)} chapters: only the first {limits.max_pages} read")
    props = {}
    title = opf.find(".//dc:title", _NS)
    if title is not None and (title.text or "").strip():
        props["title"] = title.text.strip()
    creator = opf.find(".//dc:creator", _NS)
    if creator is not None and (creator.text or "").strip():
        props["author"] = creator.text.strip()
    subjects = [s.text.strip() for s in opf.findall(".//dc:subject", _NS) if (s.text or "").strip()]
    if subjects:
        props["tags"] = subjects[:50]
    return Converted(text="\n\n".join(out) + "\n", units=len(out), warnings=warnings, properties=props)
