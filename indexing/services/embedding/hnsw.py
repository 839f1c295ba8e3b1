"""The per-fingerprint partial HNSW index (see the package docstring)."""

from __future__ import annotations

from django.db import connection

from indexing.models import Chunk, EmbeddingFingerprint

HNSW_M = 16
HNSW_EF_CONSTRUCTION = 128


def hnsw_index_ensure(fingerprint: EmbeddingFingerprint) -> bool:
    """Create the fingerprint's HNSW index if it does not exist yet. True when built now."""
    if hnsw_index_exists(fingerprint) or not Chunk.objects.filter(fingerprint=fingerprint).exists():
        return False
    with connection.cursor() as cursor:
        # Building wants the graph in memory; the default 64MB makes pgvector fall back
        # to a much slower build from a few tens of thousands of vectors on.
        cursor.execute("SET maintenance_work_mem = '1GB'")
        cursor.execute("SET max_parallel_maintenance_workers = 2")
        if connection.in_atomic_block:
            # Django's foreign keys are deferred: inside a transaction (tests, callers
            # holding one) their pending checks must run before CREATE INDEX may.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")
        try:
            cursor.execute(
                f'CREATE INDEX IF NOT EXISTS "{fingerprint.hnsw_index_name}" ON indexing_chunk '
                f"USING hnsw ((embedding::vector({int(fingerprint.dims)})) vector_cosine_ops) "
                f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) "
                f"WHERE fingerprint_id = {int(fingerprint.pk)}"
            )
            cursor.execute("ANALYZE indexing_chunk")
        finally:
            cursor.execute("RESET maintenance_work_mem")
            cursor.execute("RESET max_parallel_maintenance_workers")
    return True


def hnsw_index_exists(fingerprint: EmbeddingFingerprint) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_indexes WHERE tablename = 'indexing_chunk' AND indexname = %s",
                       [fingerprint.hnsw_index_name])
        return cursor.fetchone() is not None
