# Sourced by the eval/runs scripts on the GPU machine, from the checkout's root with .whl carried
# (scripts/gpu_wheels.sh fills it):
# kskill and the dependencies the machine's image lacks installed to /tmp/site once per machine
# (a warm machine keeps it), the big packages byte-compiled, and the environment that uses them.
# Expects S (the state folder) to be set; KSKILL_HOME lives in it.
SP=$(python3 -c 'import sysconfig;print(sysconfig.get_paths()["purelib"])')
if [ ! -d /tmp/site/kskill ]; then
  python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  python3 -m compileall -q -j 16 $SP/torch $SP/triton $SP/sympy $SP/mpmath $SP/numpy $SP/networkx $SP/jinja2 $SP/markupsafe /tmp/site >/dev/null 2>&1
fi
export KSKILL_GIT_COMMIT=$(cat .whl/COMMIT 2>/dev/null)  # written beside the kskill wheel when it was built
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH KSKILL_HOME=$S/kh PYTHONUNBUFFERED=1
echo "setup done at ${SECONDS}s"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
