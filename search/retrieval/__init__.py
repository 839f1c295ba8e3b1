"""Retrieval: one ranked list per search, keyword (BM25 over the index, in SQL: keyword.py) or vector
(pgvector: vector.py).

The hybrid pipeline (search.pipeline) fuses these lists; faces call the pipeline's dispatch, not
these functions. Nothing is imported here: a keyword search should not load the vector side.
"""
