# Sourced by the eval/runs scripts on the GPU machine, from the checkout's root with .whl carried
# (scripts/gpu_wheels.sh fills it):
# kskill and the dependencies the machine's image lacks installed to /tmp/site once per machine
# (a warm machine keeps it), the big packages byte-compiled, and the environment that uses them.
# Expects S (the state folder) to be set; KSKILL_HOME lives in it.
SP=$(python3 -c 'import sysconfig;print(sysconfig.get_paths()["purelib"])')
# A warm machine that installed another commit's wheel gets this one's: the rows name .whl/COMMIT, so the code
# that runs must be the one built from it (session 46's call 3 ran the previous call's kskill under the new name).
if [ ! -d /tmp/site/kskill ] || ! cmp -s .whl/COMMIT /tmp/site/KSKILL_COMMIT; then
  fresh=$([ -d /tmp/site/kskill ] || echo 1)
  python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  cp .whl/COMMIT /tmp/site/KSKILL_COMMIT
  [ -n "$fresh" ] && python3 -m compileall -q -j 16 $SP/torch $SP/triton $SP/sympy $SP/mpmath $SP/numpy $SP/networkx \
    $SP/jinja2 $SP/markupsafe /tmp/site >/dev/null 2>&1
  python3 -m compileall -q -j 16 /tmp/site/kskill >/dev/null 2>&1
fi
export KSKILL_GIT_COMMIT=$(cat .whl/COMMIT 2>/dev/null)  # written beside the kskill wheel when it was built
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH KSKILL_HOME=$S/kh PYTHONUNBUFFERED=1
echo "setup done at ${SECONDS}s"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
