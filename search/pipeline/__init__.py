"""The search pipeline: `dispatch.search_run` is the one entry every face calls, whatever the mode.

Keyword and vector searches go straight to retrieval; a hybrid query (hybrid.py) expands the
query, retrieves in parallel, fuses the lists and re-ranks, each stage bounded by a deadline.
Nothing is imported here, so that a keyword search does not load the hybrid side.
"""
