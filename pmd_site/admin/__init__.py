"""The Django admin: collections, documents and jobs (indexing.py), API tokens (tokens.py), OAuth
clients and grants (oauth.py)."""

from pmd_site.admin import indexing, oauth, tokens  # noqa: F401 - importing registers the model admins
