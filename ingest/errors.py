"""Errors of the ingest layer. A `FileRejected` stops one file; the walk goes on with the rest."""

from kskill.graph_schema.errors import KskillError


class IngestError(KskillError):
    """Ingest could not go on."""


class FileRejected(IngestError):
    """One file cannot be ingested: unreadable, binary, empty, too large, encrypted or malformed.

    The message names the problem and the fix; the pipeline records it and moves on.
    """


class NoteError(FileRejected):
    """A structured engineering note that does not follow the notes format."""


class ExtractionError(IngestError):
    """An extractor failed (for the LLM brain: the endpoint or its answer)."""
