"""Zip containers (DOCX, PPTX, XLSX, EPUB) are opened only when what they unpack to is bounded:
a zip bomb is refused before any library reads it."""

from __future__ import annotations

import io
import zipfile

from indexing.convert import ConversionRefused, Limits

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # encrypted Office files and the old binary formats


def zip_checked(data: bytes, limits: Limits, what: str) -> zipfile.ZipFile:
    if data.startswith(OLE_MAGIC):
        raise ConversionRefused(f"password-protected (encrypted) or an old binary Office file, not a {what} file")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise ConversionRefused(f"not a {what} file (broken or wrong extension: no zip container)") from None
    members = archive.infolist()
    total = sum(m.file_size for m in members)
    if total > limits.max_unzipped_bytes:
        raise ConversionRefused(
            f"unpacks to {total:,} bytes, over the {limits.max_unzipped_bytes:,}-byte limit "
            "(PMD_CONVERT_MAX_UNZIPPED_BYTES): a zip bomb or a huge file"
        )
    if len(members) > 100_000:
        raise ConversionRefused(f"holds {len(members):,} files: refused")
    return archive
