"""The Django admin: collections, documents and jobs (indexing.py), API tokens (tokens.py)."""

from pmd_site.admin import indexing, tokens  # noqa: F401 - importing registers the model admins
