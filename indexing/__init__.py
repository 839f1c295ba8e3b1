"""The bottom layer: the index's data, keeping it up to date, and the infrastructure under search.

The layers above (the search service and the faces) use these modules:
- `indexing.services`: every write (collections, documents, contexts, accounts, tokens, jobs,
  saved searches, the search log), one module per area;
- `indexing.selectors`: every read, with documents found the way users name them;
- `indexing.errors`: every error pmd raises for a caller to act on;
- `indexing.access`: who is asking and what they may see and change (`Access`);
- `indexing.models`: the records themselves (collections, documents, contents, chunks, jobs...);
- `indexing.links` and `indexing.attachments`: a note's links and backlinks, a collection's images.

The rest (the keyword index, the LLM clients, conversion, chunking, markdown, git, locks,
replicas) is what the services and the search service stand on.
Nothing is imported here: this package is a Django app, loaded before its models may be.
"""
