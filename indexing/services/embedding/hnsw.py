"""The per-fingerprint partial HNSW index (see the package docstring).

PMD_VECTOR_STORAGE picks what the index holds: `vector` (full precision) or `halfvec` (half
precision: half the index, which is the memory vector search wants cached). The table keeps
full precision either way, so switching needs no re-embedding, only another index: the index
and every search use `distance_sql`, the one expression the planner must see in both.
"""

from __future__ import annotations

from django.conf import settings
from django.db import connection

from indexing.models import Chunk, EmbeddingFingerprint

HNSW_M = 16
HNSW_EF_CONSTRUCTION = 128
STORAGE_OPS = {"vector": "vector_cosine_ops", "halfvec": "halfvec_cosine_ops"}


def vector_storage() -> str:
    return "halfvec" if settings.PMD_VECTOR_STORAGE == "halfvec" else "vector"


def distance_sql(dims: int, column: str, query: str) -> str:
    """Cosine distance between a chunk's embedding column and the query, as the index orders it."""
    kind = vector_storage()
    return f"({column}::{kind}({int(dims)})) <=> {query}::{kind}({int(dims)})"


def hnsw_index_name(fingerprint: EmbeddingFingerprint, storage: str | None = None) -> str:
    storage = storage or vector_storage()
    return fingerprint.hnsw_index_name + ("" if storage == "vector" else f"_{storage}")


def hnsw_index_drop(fingerprint: EmbeddingFingerprint) -> None:
    """Drop the fingerprint's index whatever it holds."""
    with connection.cursor() as cursor:
        for storage in STORAGE_OPS:
            cursor.execute(f'DROP INDEX IF EXISTS "{hnsw_index_name(fingerprint, storage)}"')


def hnsw_index_ensure(fingerprint: EmbeddingFingerprint) -> bool:
    """Create the fingerprint's HNSW index if it does not exist yet. True when built now.
    An index of the other storage is dropped once this one is built."""
    if hnsw_index_exists(fingerprint) or not Chunk.objects.filter(fingerprint=fingerprint).exists():
        return False
    storage, dims = vector_storage(), int(fingerprint.dims)
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
                f'CREATE INDEX IF NOT EXISTS "{hnsw_index_name(fingerprint)}" ON indexing_chunk '
                f"USING hnsw ((embedding::{storage}({dims})) {STORAGE_OPS[storage]}) "
                f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) "
                f"WHERE fingerprint_id = {int(fingerprint.pk)}"
            )
            for other in STORAGE_OPS:
                if other != storage:
                    cursor.execute(f'DROP INDEX IF EXISTS "{hnsw_index_name(fingerprint, other)}"')
            cursor.execute("ANALYZE indexing_chunk")
        finally:
            cursor.execute("RESET maintenance_work_mem")
            cursor.execute("RESET max_parallel_maintenance_workers")
    return True


def hnsw_index_exists(fingerprint: EmbeddingFingerprint) -> bool:
    """Whether the index vector search uses (that of the configured storage) exists."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_indexes WHERE tablename = 'indexing_chunk' AND indexname = %s",
            [hnsw_index_name(fingerprint)],
        )
        return cursor.fetchone() is not None
