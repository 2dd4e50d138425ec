"""Triton code templates of the recipe brain, one module per kernel family."""
