"""Reviewer: sandboxed compile, correctness, timing and profiling of candidates."""
