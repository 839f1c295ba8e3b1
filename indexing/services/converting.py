"""Files that are not markdown, as text: converted once per content (by SHA-256), in a child
process with the PMD_CONVERT_* limits, and kept (indexing.models.Extraction), refusals too."""

from __future__ import annotations

import hashlib
import time
from datetime import timedelta

from django.conf import settings
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from indexing.convert import CONVERTER_VERSION, ConversionRefused, Limits
from indexing.convert.sandbox import Converter, Extracted, SandboxLimits
from indexing.models import Document, Extraction

PROGRESS_SECONDS = 1.0  # a file read for longer reports the page it is on, this often


def convert_limits() -> SandboxLimits:
    return SandboxLimits(
        seconds=float(settings.PMD_CONVERT_SECONDS),
        memory_mb=settings.PMD_CONVERT_MEMORY_MB,
        progress_seconds=PROGRESS_SECONDS,
        limits=Limits(
            max_pages=settings.PMD_CONVERT_MAX_PAGES,
            max_unzipped_bytes=settings.PMD_CONVERT_MAX_UNZIPPED_BYTES,
            max_cells=settings.PMD_CONVERT_MAX_CELLS,
            ocr="off" if settings.PMD_OCR.strip().lower() == "off" else "auto",
            ocr_languages=settings.PMD_OCR_LANGUAGES,
        ),
    )


def extraction_key(data: bytes, fmt: str, limits: Limits) -> str:
    """The file's hash, its format, the converter's version (and for a PDF whether OCR was on: a scan
    refused without it is read once it is on)."""
    ocr = ":ocr" if fmt == "pdf" and limits.ocr != "off" else ""
    return f"{hashlib.sha256(data).hexdigest()}:{fmt}:{CONVERTER_VERSION}{ocr}"


def file_text_extract(*, data: bytes, fmt: str, converter: Converter | None = None) -> Extracted:
    """The markdown-like text of a file's bytes: the stored one, else converted now (by `converter`,
    the scan's child process; else a child of its own) and stored. ConversionRefused (with its
    reason) for a file that cannot be read, stored or not."""
    sandbox = convert_limits()
    key = extraction_key(data, fmt, sandbox.limits)
    stored = Extraction.objects.filter(key=key).first()
    if stored is None:
        started = time.perf_counter()
        try:
            if converter is None:
                with Converter(sandbox) as own:
                    extracted = own.convert(fmt, data)
            else:
                extracted = converter.convert(fmt, data)
            stored = Extraction(
                key=key,
                text=extracted.text.replace("\x00", "\ufffd"),
                units=extracted.units,
                warnings=extracted.warnings,
            )
        except ConversionRefused as exc:
            stored = Extraction(key=key, refused=str(exc))
        stored.seconds = time.perf_counter() - started
        Extraction.objects.bulk_create([stored], ignore_conflicts=True)
    if stored.refused:
        raise ConversionRefused(stored.refused)
    return Extracted(text=stored.text, units=stored.units, warnings=list(stored.warnings or []), key=key)


PRUNE_BATCH = 1000
REFUSALS_KEPT_DAYS = 30  # maintenance keeps a refusal this long: a file that hangs the converter is not tried again


def extractions_prune(*, keys: set[str] | None = None) -> int:
    """Delete stored conversions no active document reads any more (its file changed or went away);
    how many. `keys`: only these (those a scan stopped using: bounded by what it changed); None: all
    of them (maintenance), refusals only once older than REFUSALS_KEPT_DAYS (no document names a
    refused file, and trying it again may cost the time limit)."""
    used = Document.objects.filter(active=True, extraction_key=OuterRef("key"))
    unused = Extraction.objects.filter(~Exists(used))
    if keys is None:
        old = timezone.now() - timedelta(days=REFUSALS_KEPT_DAYS)
        unused = unused.filter(Q(refused="") | Q(created_at__lt=old))
        deleted = 0
        while batch := list(unused.values_list("key", flat=True)[:PRUNE_BATCH]):
            gone = unused.filter(key__in=batch).delete()[0]
            deleted += gone
            if not gone:
                break
        return deleted
    keys = sorted(k for k in keys if k)
    return sum(unused.filter(key__in=keys[i : i + PRUNE_BATCH]).delete()[0] for i in range(0, len(keys), PRUNE_BATCH))
