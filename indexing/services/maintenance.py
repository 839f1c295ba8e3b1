"""Housekeeping: removing what nothing refers to any more."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection, transaction

from indexing.models import Content, Document, LLMCache


@dataclass
class CleanupReport:
    inactive_documents: int
    orphaned_content: int
    llm_cache_entries: int

    def as_dict(self) -> dict:
        return self.__dict__.copy()


def index_cleanup(*, clear_llm_cache: bool = True, vacuum: bool = True) -> CleanupReport:
    with transaction.atomic():
        inactive, _ = Document.objects.filter(active=False).delete()
        orphans, _ = Content.objects.filter(documents__isnull=True, commits__isnull=True).delete()
        cache = LLMCache.objects.all().delete()[0] if clear_llm_cache else 0
    if vacuum and not connection.in_atomic_block:
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    return CleanupReport(inactive, orphans, cache)
