"""The root of kskill's exceptions. Each layer subclasses it; only the CLI turns them into messages."""


class KskillError(Exception):
    """Anything kskill can explain to a user in one line."""


class ConfigError(KskillError):
    """Settings that cannot be used as given."""


class GraphError(KskillError):
    """The graph store failed or refused an operation."""


class StoreUnavailable(GraphError):
    """The graph store cannot be reached or started."""


class SchemaError(GraphError):
    """Data that does not fit the graph schema."""
