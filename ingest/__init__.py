"""Ingest: load documents, extract bottleneck -> technique -> precondition claims with evidence,
resolve them against the graph, and write them with provenance (`kskill ingest`)."""
