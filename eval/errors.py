"""Errors of `kskill eval`, under the root KskillError: the CLI prints them as one line."""

from kskill.graph_schema.errors import KskillError


class EvalError(KskillError):
    """A suite, a results folder or an evaluation setting that cannot be used as given."""
