"""Embedding the indexed content: chunk, call the LLM backend in batches, store vectors.

What is pending is derived from the database, never from a queue: a content is
pending for the configured fingerprint (model + dims + chunking + document
prompt) when an active document points at it and no `ContentEmbedding` marker
exists for it. That gives the guarantees the workers need:

* staleness is automatic: a scan that changes a file gives the document a new
  content hash, which has no marker, so it is pending; unchanged content (or a
  file copied elsewhere) costs nothing;
* idempotent: chunks are unique per (fingerprint, content, seq) and inserted with
  ON CONFLICT DO NOTHING; a request arriving while another run holds the run
  lock waits for it (its job stays queued, saying so), then embeds only what
  is still pending; a duplicate delivery finds its job done, or nothing pending;
* a worker killed mid-batch loses only the batch in flight: every batch commits
  its chunks, and a content's marker is written in the same transaction as its
  last chunk; the next run re-chunks a partly stored content (chunking is
  deterministic) and embeds only the missing sequence numbers. The run lock is a
  session-level advisory lock, released by PostgreSQL when the dead worker's
  connection goes away; its job record is marked failed ("worker stopped", see
  indexing/services/jobs.py) and the next run resumes the work;
* switching model (or chunk size, or prompt) is a new fingerprint: everything
  becomes pending for it, vector search only ever reads one fingerprint, and the
  old vectors are dropped once the new ones cover every active document.

HNSW index: the `embedding` column is an untyped `vector`, so one table holds any
dimension. pgvector can only index one dimension at a time, so each fingerprint
gets a partial expression index
``USING hnsw ((embedding::vector(D)) vector_cosine_ops) WHERE fingerprint_id = N``
(``halfvec`` in place of ``vector`` with PMD_VECTOR_STORAGE=halfvec)
created at the end of a run (building after a bulk load is much faster than
inserting into an existing graph) and dropped with its fingerprint. Vector search
uses the same expression and predicate so the planner can pick it.

Modules: `config` (settings → EmbeddingConfig, fingerprints), `pending` (what is left to
embed), `run` (`embed_pending`), `hnsw` (the index DDL), `lock` (the run lock), `status`
(`embedding_status`), `errors`. Import from the package.
"""

from indexing.services.embedding.config import (
    EmbeddingConfig,
    chunk_params_from_settings,
    embedding_config,
    fingerprint_configured,
    fingerprint_ensure,
)
from indexing.services.embedding.hnsw import (
    HNSW_EF_CONSTRUCTION,
    HNSW_M,
    distance_sql,
    hnsw_index_drop,
    hnsw_index_ensure,
    hnsw_index_exists,
    hnsw_index_name,
    vector_storage,
)
from indexing.services.embedding.lock import embedding_running
from indexing.services.embedding.pending import (
    forget_pending_counts,
    pending_contents,
    pending_count,
    wanted_contents,
)
from indexing.services.embedding.run import (
    CONTENTS_PER_ROUND,
    EmbedReport,
    ProgressCallback,
    embed_pending,
    embedding_stop,
)
from indexing.services.embedding.status import embedding_status, embedding_underway, embedding_waiting

__all__ = [
    "CONTENTS_PER_ROUND",
    "HNSW_EF_CONSTRUCTION",
    "HNSW_M",
    "EmbedReport",
    "EmbeddingConfig",
    "ProgressCallback",
    "chunk_params_from_settings",
    "embed_pending",
    "embedding_config",
    "embedding_running",
    "embedding_status",
    "embedding_stop",
    "embedding_underway",
    "embedding_waiting",
    "fingerprint_configured",
    "fingerprint_ensure",
    "forget_pending_counts",
    "distance_sql",
    "hnsw_index_drop",
    "hnsw_index_ensure",
    "hnsw_index_exists",
    "hnsw_index_name",
    "vector_storage",
    "pending_contents",
    "pending_count",
    "wanted_contents",
]
