"""Indexing notes and documents: file limits, converting other formats, OCR, languages, where
collections may be added, git history."""

from __future__ import annotations

from pathlib import Path

from pmd_site.settings.table import read

PMD_MAX_FILE_BYTES = read("PMD_MAX_FILE_BYTES")
PMD_NOTE_MAX_BYTES = read("PMD_NOTE_MAX_BYTES")
PMD_DEFAULT_MASK = read("PMD_DEFAULT_MASK")
# Files that are not markdown (PDF, DOCX, PPTX, XLSX, HTML, EPUB: indexing/convert) are read in a
# child process with these limits; a file over one is a problem with the reason, the rest indexes.
PMD_CONVERT_MAX_FILE_BYTES = read("PMD_CONVERT_MAX_FILE_BYTES")
PMD_CONVERT_SECONDS = read("PMD_CONVERT_SECONDS")
PMD_CONVERT_MEMORY_MB = read("PMD_CONVERT_MEMORY_MB")
PMD_CONVERT_MAX_PAGES = read("PMD_CONVERT_MAX_PAGES")
PMD_CONVERT_MAX_UNZIPPED_BYTES = read("PMD_CONVERT_MAX_UNZIPPED_BYTES")
PMD_CONVERT_MAX_CELLS = read("PMD_CONVERT_MAX_CELLS")
# Scanned PDF pages (no text layer): auto reads them with tesseract when it is installed; off never.
PMD_OCR = read("PMD_OCR")
PMD_OCR_LANGUAGES = read("PMD_OCR_LANGUAGES")
PMD_TEXT_SEARCH_CONFIG = read("PMD_TEXT_SEARCH_CONFIG")
# Language of new collections: auto (detected from a sample of the notes), or a code such as de.
PMD_LANGUAGE = read("PMD_LANGUAGE")
# Folders under which staff may add collections from the web UI, API and admin (the CLI is not limited).
PMD_COLLECTION_ROOTS = [Path(p).expanduser() for p in read("PMD_COLLECTION_ROOTS")]
# multi-get answers (CLI, API, MCP) hold at most this much text: documents plus what was left out.
PMD_MULTI_GET_MAX_TOTAL_BYTES = read("PMD_MULTI_GET_MAX_TOTAL_BYTES")
# History search: the commits of collections inside a git work tree.
PMD_HISTORY = read("PMD_HISTORY")
PMD_HISTORY_DIFF_LINES = read("PMD_HISTORY_DIFF_LINES")
PMD_HISTORY_MAX_COMMITS = read("PMD_HISTORY_MAX_COMMITS")
# `pmd update --pull`: seconds a `git pull` may take before it and all it started are killed.
PMD_GIT_PULL_TIMEOUT = max(1.0, read("PMD_GIT_PULL_TIMEOUT"))
