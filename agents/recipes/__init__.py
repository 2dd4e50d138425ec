"""Recipe brain: deterministic kernel generation, one recipe per Technique."""
