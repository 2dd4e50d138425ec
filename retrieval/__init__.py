"""Retrieval: embeddings, a FAISS index kept in step with the graph, and fuzzy matching over skills."""

from .api import embedder_for, retriever_for, search
from .embedder import Embedder, SentenceTransformerEmbedder, load_embedder
from .errors import EmbedderUnavailable, IndexUnusable, QueryError, RetrievalError
from .records import SEARCHABLE_KINDS, SKILL_KINDS, SearchRecord
from .search import THRESHOLDS, Match, Retriever, Thresholds
from .snapshot import open_retriever, refresh

__all__ = [
    "SEARCHABLE_KINDS", "SKILL_KINDS", "THRESHOLDS", "Embedder", "EmbedderUnavailable", "IndexUnusable",
    "Match", "QueryError", "RetrievalError", "Retriever", "SearchRecord", "SentenceTransformerEmbedder",
    "Thresholds", "embedder_for", "load_embedder", "open_retriever", "refresh", "retriever_for", "search",
]
