"""The index's models, one module per part of what pmd keeps; every model is importable from here.

Django finds an app's models through its `models` module: importing each module below is
what registers them.
"""

from indexing.models.accounts import ApiToken, AuditEvent, ExternalIdentity, TokenFailure
from indexing.models.collections import Collection, PathContext
from indexing.models.documents import Content, Document, DocumentLink, Extraction
from indexing.models.embeddings import Chunk, ContentEmbedding, EmbeddingFingerprint
from indexing.models.history import CollectionHistory, Commit
from indexing.models.jobs import FileProblem, IndexSetting, Job, LLMCache
from indexing.models.keyword_index import KeywordPassage, KeywordPosting, KeywordStats, KeywordTerm
from indexing.models.oauth import OAuthClient, OAuthCode, OAuthGrant
from indexing.models.searches import Answer, AnswerQuerySet, SavedSearch, SearchFeedback, SearchLogEntry

__all__ = [
    "Answer",
    "AnswerQuerySet",
    "ApiToken",
    "AuditEvent",
    "Chunk",
    "Collection",
    "CollectionHistory",
    "Commit",
    "Content",
    "ContentEmbedding",
    "Document",
    "DocumentLink",
    "EmbeddingFingerprint",
    "ExternalIdentity",
    "Extraction",
    "FileProblem",
    "IndexSetting",
    "Job",
    "KeywordPassage",
    "KeywordPosting",
    "KeywordStats",
    "KeywordTerm",
    "LLMCache",
    "OAuthClient",
    "OAuthCode",
    "OAuthGrant",
    "PathContext",
    "SavedSearch",
    "SearchFeedback",
    "SearchLogEntry",
    "TokenFailure",
]
