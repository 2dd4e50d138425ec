"""CLI command groups, one module per noun."""
