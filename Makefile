# The two commands the README opens with.
.PHONY: demo test setup

setup:
	bash scripts/setup.sh --dev

demo: setup
	.venv/bin/kskill graph init
	.venv/bin/kskill optimize kskill/examples/gemm_bias_gelu.py

test: setup
	.venv/bin/python -m pytest -q
