# The commands the README opens with.
.PHONY: demo test test-fast setup

# Tests that `make test-fast` leaves out: the long loop and retrieval runs, the GPU tier and the fuzzing.
FAST = not slow and not gpu and not reliability

setup:
	bash scripts/setup.sh --dev

demo: setup
	.venv/bin/kskill graph init
	.venv/bin/kskill optimize "$$(.venv/bin/kskill examples gemm_bias_gelu)"

test: setup
	.venv/bin/python -m pytest -q

test-fast: setup
	.venv/bin/python -m pytest -q -m "$(FAST)"
