"""A collection's images, for the document view's embeds (`![[diagram.png|300]]`).
One that is not there, or not seen, is DocumentNotFound (a 404 in every face).

Read under the same rules as its notes: the collection must be one `access` sees (else "not
found", like a missing note), the path stays inside the collection folder, no part of it is a
hidden folder (`.git`, `.obsidian`), and the file is opened as the scan opens notes
(indexing.services.scanning.collection_file_open: a symbolic link as the last part is refused, and
the opened file must lie inside the folder). Only images are served.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass

from django.conf import settings

from indexing.access import Access
from indexing.convert import format_of
from indexing.errors import DocumentNotFound
from indexing.markdown import is_image
from indexing.models import Collection, Document
from indexing.services.scanning import collection_file_open, collection_root_moved

ATTACHMENT_MAX_BYTES = 20 * 1024 * 1024
FIND_MAX_ENTRIES = 20_000  # folder entries looked at to find an image by its name alone
CONTENT_TYPES = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "svg": "image/svg+xml",
    "webp": "image/webp",
    "bmp": "image/bmp",
    "ico": "image/x-icon",
    "avif": "image/avif",
}


@dataclass
class Attachment:
    data: bytes
    content_type: str


def _clean(path: str) -> str | None:
    """The path relative to the collection root, or None when it leaves it or enters a hidden folder."""
    norm = posixpath.normpath(path.replace("\\", "/").lstrip("/"))
    if norm in {"", ".", ".."} or norm.startswith("../") or "\x00" in norm:
        return None
    if any(part.startswith(".") for part in norm.split("/")):
        return None
    return norm


def _visible_collection(name: str, access: Access) -> Collection:
    ids = access.collection_ids()
    found = Collection.objects.filter(name=name)
    if ids is not None:
        found = found.filter(pk__in=ids)
    collection = found.first()
    if collection is None:
        raise DocumentNotFound(f"no image '{name}/…'")
    return collection


def _is_file(root: str, rel: str) -> bool:
    try:
        return os.path.isfile(os.path.join(root, rel)) and not os.path.islink(os.path.join(root, rel))
    except (OSError, ValueError):
        return False


def attachment_find(collection: Collection, name: str, *, near: str) -> str | None:
    """The path of the image a note at `near` embeds as `name`, as Obsidian finds it: beside the
    note, from the collection root, else the first file of that name in the collection (a bounded
    walk that follows no link and skips hidden folders). None when there is none."""
    if not is_image(name):
        return None
    root = collection.root_path
    folder = posixpath.dirname(near)
    for candidate in ([posixpath.join(folder, name)] if folder else []) + [name]:
        rel = _clean(candidate)
        if rel and _is_file(root, rel):
            return rel
    if "/" in name.strip("/"):
        return None
    wanted, seen = name.strip("/"), 0
    pending = [""]
    while pending:
        rel_dir = pending.pop(0)
        try:
            entries = sorted(os.scandir(os.path.join(root, rel_dir)), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > FIND_MAX_ENTRIES:
                return None
            if entry.name.startswith("."):
                continue
            rel = posixpath.join(rel_dir, entry.name) if rel_dir else entry.name
            if entry.is_dir(follow_symlinks=False):
                pending.append(rel)
            elif entry.name == wanted and entry.is_file(follow_symlinks=False):
                return rel
    return None


def attachment_read(collection_name: str, path: str, *, access: Access) -> Attachment:
    """The bytes of an image in a collection `access` sees (DocumentNotFound otherwise)."""
    collection = _visible_collection(collection_name, access)
    rel = _clean(path)
    if rel is None or not is_image(rel):
        raise DocumentNotFound(f"no image '{collection_name}/{path}'")
    if collection_root_moved(collection):
        raise DocumentNotFound(f"no image '{collection_name}/{path}'")
    try:
        with collection_file_open(collection, os.path.join(collection.root_path, rel)) as handle:
            data = handle.read(ATTACHMENT_MAX_BYTES + 1)
    except OSError:
        raise DocumentNotFound(f"no image '{collection_name}/{path}'") from None
    if len(data) > ATTACHMENT_MAX_BYTES:
        raise DocumentNotFound(f"image '{collection_name}/{path}' is over {ATTACHMENT_MAX_BYTES:,} bytes")
    return Attachment(data=data, content_type=CONTENT_TYPES[rel.rsplit(".", 1)[-1].lower()])


# The original of a converted document (PDF, DOCX, …), offered for download: a type that no
# browser runs (HTML goes as bytes), always as an attachment (the face sets the header).
ORIGINAL_TYPES = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "epub": "application/epub+zip",
    "text": "text/plain; charset=utf-8",
    "markdown": "text/plain; charset=utf-8",
}


@dataclass
class Original:
    data: bytes
    content_type: str
    filename: str


def original_read(collection_name: str, path: str, *, access: Access) -> Original:
    """The file an indexed document was read from, for those who see its collection (else
    DocumentNotFound, like a missing one): only an active document's path, opened as the scan opens it."""
    collection = _visible_collection(collection_name, access)
    rel = _clean(path)
    missing = DocumentNotFound(f"no document pmd://{collection_name}/{path}")
    if rel is None or collection_root_moved(collection):
        raise missing
    if not Document.objects.filter(collection=collection, path=rel, active=True).exists():
        raise missing
    limit = settings.PMD_CONVERT_MAX_FILE_BYTES
    try:
        with collection_file_open(collection, os.path.join(collection.root_path, rel)) as handle:
            data = handle.read(limit + 1)
    except OSError:
        raise missing from None
    if len(data) > limit:
        raise DocumentNotFound(f"pmd://{collection_name}/{rel} is over {limit:,} bytes")
    return Original(
        data=data,
        content_type=ORIGINAL_TYPES.get(format_of(rel), "application/octet-stream"),
        filename=posixpath.basename(rel),
    )
