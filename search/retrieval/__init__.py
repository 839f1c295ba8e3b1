"""Retrieval: one ranked list per search, keyword (BM25 over the index, in SQL) or vector (pgvector).

The hybrid pipeline (search.pipeline) fuses these lists; faces call the pipeline's dispatch,
not these functions.
"""

from search.retrieval.common import SearchError
from search.retrieval.keyword import keyword_search
from search.retrieval.query_parser import parse_query
from search.retrieval.vector import NotEmbedded, query_embedding, vector_search

__all__ = ["NotEmbedded", "SearchError", "keyword_search", "parse_query", "query_embedding", "vector_search"]
