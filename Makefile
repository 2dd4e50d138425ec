# The commands the README opens with.
.PHONY: demo test test-fast setup

# Tests that `make test-fast` leaves out: the long loop, eval and retrieval runs, the GPU tier, the
# fault suite, the LLM tier (a real model on the CPU) and the Ray tier (a real local Ray cluster).
FAST = not slow and not gpu and not reliability and not llm and not ray
# Test processes (pytest-xdist), each taking whole files: most tests hold one core, and a file's
# module fixtures are built once. Files go out in the order tests/conftest.py sets (long files
# first), not xdist's own (most tests first). The slowest tests are listed at the end.
WORKERS ?= 2
PYTEST = .venv/bin/python -m pytest -q -n $(WORKERS) --dist loadfile --no-loadscope-reorder --durations=15

setup:
	bash scripts/setup.sh --dev

demo: setup
	.venv/bin/kskill graph init
	.venv/bin/kskill optimize "$$(.venv/bin/kskill examples gemm_bias_gelu)"

test: setup
	$(PYTEST)

test-fast: setup
	$(PYTEST) -m "$(FAST)"
