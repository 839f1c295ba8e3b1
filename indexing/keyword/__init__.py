"""The BM25 keyword index's writer and the text analysis both its sides share.

Scanning (indexing.services) writes the index after every change; query-time scoring
(search.retrieval.keyword) reads the tables and analyses queries with the same
`prepare_text`, so indexing and querying produce the same lexemes. This package sits
below both: it imports only models and indexing.locks.
"""

from indexing.keyword.analysis import WORD, has_cjk, prepare_text
from indexing.keyword.keyword_index import (
    keyword_index_maintain,
    keyword_index_rebuild,
    keyword_index_update,
)

__all__ = [
    "WORD",
    "has_cjk",
    "keyword_index_maintain",
    "keyword_index_rebuild",
    "keyword_index_update",
    "prepare_text",
]
