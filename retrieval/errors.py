"""Errors of the retrieval layer: bad queries, unusable models and unusable index files."""

from kskill.graph_schema.errors import KskillError


class RetrievalError(KskillError):
    """Retrieval could not answer."""


class QueryError(RetrievalError):
    """A search query that cannot be used as given (empty, or an unknown kind)."""


class EmbedderUnavailable(RetrievalError):
    """The embedding model cannot be loaded from the path given."""


class IndexUnusable(RetrievalError):
    """An index file on disk is corrupt or was built for another model; it is rebuilt, never trusted."""
