"""The sandbox contains what the child does: files, processes, memory, time, secrets, network, crashes.

Each containment test runs under every sandbox that can work on this machine (bwrap when it is
installed, unshare when the kernel allows user namespaces) and checks the effect is absent on the
host, not only that the child failed.
"""

import os
import socket
import subprocess
import sys
import time

import pytest

from kskill.agents.reviewer import sandbox, sandbox_layout
from kskill.agents.reviewer.sandbox import SandboxLimits, SandboxUnavailable, run_sandboxed
from kskill.agents.reviewer.sandbox_layout import allowed_environment, driver_dirs_in

PROBE = (sys.executable, "-S", "-c", "pass")  # run_sandboxed's default probe
RAW_CHECKS = {  # the plain tool, without kskill: if this fails, the machine cannot, and the test skips
    "bwrap": ["bwrap", "--unshare-all", "--ro-bind", "/", "/", "true"],
    "unshare": ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount", "--net", "true"],
}


def limits(**kw) -> SandboxLimits:
    base = dict(timeout_s=30, memory_limit_mb=1024, address_space_limit=True, isolate_network=True)
    return SandboxLimits(**{**base, **kw})


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def force_backend(monkeypatch, name: str) -> None:
    monkeypatch.setattr(sandbox, "BACKENDS", () if name == "none" else (name,))
    sandbox.choose_sandbox.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_choice():
    sandbox.choose_sandbox.cache_clear()
    yield
    sandbox.choose_sandbox.cache_clear()


@pytest.fixture(params=["bwrap", "unshare"])
def backend(request, monkeypatch) -> str:
    """Each sandbox tool that this machine can run; kskill's use of it must then work too."""
    try:
        works = subprocess.run(RAW_CHECKS[request.param], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        works = False
    if not works:
        pytest.skip(f"{request.param} is not installed or cannot make namespaces on this machine")
    force_backend(monkeypatch, request.param)
    choice = sandbox.choose_sandbox(PROBE)
    assert choice.backend == request.param, choice.note
    return request.param


def test_environment_is_an_allow_list():
    base = {"OPENAI_API_KEY": "x", "DB_URL": "postgres://u:pw@h", "GH_TOKEN": "y", "PATH": "/bin",
            "TORCH_HUB_TOKEN": "t", "TRITON_CACHE_DIR": "c", "LC_ALL": "C", "CUDA_VISIBLE_DEVICES": "0"}
    env, passed, dropped = allowed_environment(base, {"A": "1"})
    assert env == {"PATH": "/bin", "TRITON_CACHE_DIR": "c", "LC_ALL": "C", "CUDA_VISIBLE_DEVICES": "0", "A": "1"}
    assert passed == ["CUDA_VISIBLE_DEVICES", "LC_ALL", "PATH", "TRITON_CACHE_DIR"]
    assert dropped == ["DB_URL", "GH_TOKEN", "OPENAI_API_KEY", "TORCH_HUB_TOKEN"]


def test_names_a_problem_reads_can_be_passed_but_never_secret_looking_ones():
    base = {"KSKILL_EXAMPLE_SCALE": "4", "MY_MODEL_DIM": "512", "MY_TOKEN": "t", "OTHER": "x",
            "KSKILL_SANDBOX_ENV": "MY_MODEL_DIM, MY_TOKEN"}
    env, passed, _ = allowed_environment(base, {})
    assert env == {"KSKILL_EXAMPLE_SCALE": "4", "MY_MODEL_DIM": "512"}


def test_child_sees_only_allowed_names_and_its_own_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("DB_URL", "postgres://u:do-not-leak@h")
    monkeypatch.setenv("KSKILL_TEST_API_KEY", "do-not-leak")
    out = run_sandboxed(python("import os, tempfile; print(sorted(os.environ)); print(tempfile.gettempdir()); "
                               "print(os.environ['HOME'], os.environ['TORCH_EXTENSIONS_DIR'])"),
                        workdir=tmp_path, limits=limits(unsandboxed_ok=True))
    assert out.returncode == 0, out.log
    assert "do-not-leak" not in out.log and "DB_URL" not in out.log
    assert str(tmp_path / "tmp") in out.log and str(tmp_path / "home") in out.log
    assert {"DB_URL", "KSKILL_TEST_API_KEY"} <= set(out.dropped_env)
    assert "PATH" in out.isolation["env_passed"]


def home_entry() -> str | None:
    """Something in the user's home that no bound directory (a venv, a Python) lies under."""
    home = os.path.expanduser("~")
    for name in sorted(os.listdir(home)):
        path = os.path.join(home, name)
        if not any(p == path or p.startswith(path + "/") for p in (sys.prefix, sys.base_prefix, *sys.path)):
            return path
    return None


def test_nothing_outside_the_workdir_is_visible_or_writable(backend, tmp_path):
    workdir, outside = tmp_path / "work", tmp_path / "outside"
    workdir.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("private")
    in_home = home_entry()
    code = (f"import os\n"
            f"print('SEES_OUTSIDE', os.path.exists({str(outside / 'secret.txt')!r}))\n"
            f"print('SEES_HOME', {in_home!r} is not None and os.path.exists({in_home!r}))\n"
            f"print('PROCS', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
            f"for path in ['/etc/kskill-escape', '/usr/kskill-escape', '/kskill-escape', {str(outside / 'w')!r}]:\n"
            f"    try:\n"
            f"        open(path, 'w').write('x'); print('WROTE', path)\n"
            f"    except OSError as exc:\n"
            f"        print('REFUSED', path, type(exc).__name__)\n"
            f"open('inside.txt', 'w').write('ok')\n")
    out = run_sandboxed(python(code), workdir=workdir, limits=limits())
    assert out.returncode == 0, out.log
    assert "SEES_OUTSIDE False" in out.log and "SEES_HOME False" in out.log and "WROTE" not in out.log
    assert out.log.count("REFUSED") == 4
    assert "PROCS [1, 2]" in out.log  # its own PID namespace: the init and this process
    assert not any(os.path.exists(p) for p in ("/etc/kskill-escape", "/usr/kskill-escape", outside / "w"))
    assert (workdir / "inside.txt").read_text() == "ok"
    assert out.isolation["sandbox"] == backend and "pid" in out.isolation["namespaces"]
    assert str(workdir) in out.isolation["writable"]


def test_a_private_path_inside_a_bound_directory_is_covered(backend, tmp_path, monkeypatch):
    libs = tmp_path / "libs"
    (libs / "private").mkdir(parents=True)
    (libs / "private" / "secret.txt").write_text("private")
    (libs / "libfoo.txt").write_text("shown")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(libs))  # bound read-only, as a library directory
    workdir = tmp_path / "work"
    workdir.mkdir()
    code = (f"import os\nprint('SHOWN', open({str(libs / 'libfoo.txt')!r}).read())\n"
            f"print('PRIVATE', os.listdir({str(libs / 'private')!r}))\n")
    out = run_sandboxed(python(code), workdir=workdir, limits=limits(hidden=(str(libs / "private"),)))
    assert out.returncode == 0, out.log
    assert "SHOWN shown" in out.log and "PRIVATE []" in out.log
    assert str(libs / "private") in out.isolation["hidden"] and str(libs) in out.isolation["read_only"]


def test_a_c_extension_compiles_and_loads_inside(backend, tmp_path):
    """What Triton does for its launcher (and torch for a C++ candidate): gcc against Python.h."""
    code = ("import importlib.util, subprocess, sys, sysconfig\n"
            "open('ext.c', 'w').write('#include <Python.h>\\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, \"ext\"};'\n"
            "                         '\\nPyMODINIT_FUNC PyInit_ext(void) { return PyModule_Create(&m); }\\n')\n"
            "so = 'ext' + sysconfig.get_config_var('EXT_SUFFIX')\n"
            "subprocess.run(['gcc', '-shared', '-fPIC', '-I', sysconfig.get_paths()['include'], 'ext.c', '-o', so],"
            " check=True)\n"
            "spec = importlib.util.spec_from_file_location('ext', so)\n"
            "spec.loader.exec_module(importlib.util.module_from_spec(spec)); print('LOADED')\n")
    out = run_sandboxed(python(code), workdir=tmp_path, limits=limits(address_space_limit=False))
    assert out.returncode == 0 and "LOADED" in out.log, out.log


def test_device_nodes_given_for_the_gpu_work_inside_and_no_other_is_there(backend, tmp_path, monkeypatch):
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse to stand in for an NVIDIA device node")
    monkeypatch.setattr(sandbox_layout, "GPU_DEVICES", ("/dev/fuse",))  # a node anyone may open, as /dev/nvidia*
    code = ("import os\nfd = os.open('/dev/fuse', os.O_RDWR); print('OPENED', fd > 0)\n"
            "print('DEVICES', sorted(os.listdir('/dev')))\n")
    out = run_sandboxed(python(code), workdir=tmp_path, limits=limits())
    assert out.returncode == 0 and "OPENED True" in out.log, out.log
    assert "'kvm'" not in out.log and "'loop0'" not in out.log and "'fuse'" in out.log
    assert out.isolation["devices"] == ["/dev/fuse"]


def test_driver_library_directories_come_from_the_loader_cache():
    listing = ("3 libs found in cache `/etc/ld.so.cache'\n"
               "\tlibcuda.so.1 (libc6,x86-64) => /run/nvidia/driver/lib64/libcuda.so.1\n"
               "\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n"
               "\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1\n")
    assert driver_dirs_in(listing) == ("/run/nvidia/driver/lib64", "/usr/lib/x86_64-linux-gnu")


def test_timeout_kills_every_descendant_even_after_setsid(backend, tmp_path):
    marker = tmp_path / "grandchild-survived"
    (tmp_path / "grandchild.py").write_text(f"import os, time\nos.setsid()\ntime.sleep(3)\n"
                                            f"open({str(marker)!r}, 'w').close()\n")
    code = "import subprocess, sys, time; subprocess.Popen([sys.executable, 'grandchild.py']); time.sleep(60)"
    start = time.monotonic()
    out = run_sandboxed(python(code), workdir=tmp_path, limits=limits(timeout_s=1.5))
    assert out.timed_out and time.monotonic() - start < 15, out.log
    time.sleep(4)
    assert not marker.exists(), "a process of the timed-out sandbox outlived it"


def test_a_daemon_left_by_a_finished_worker_dies_with_it(backend, tmp_path):
    marker = tmp_path / "daemon-survived"
    code = (f"import os, time\n"
            f"if os.fork() == 0:\n"
            f"    os.setsid()\n"
            f"    if os.fork() == 0:\n"
            f"        time.sleep(3); open({str(marker)!r}, 'w').close()\n"
            f"    os._exit(0)\n"
            f"print('parent done')\n")
    out = run_sandboxed(python(code), workdir=tmp_path, limits=limits())
    assert out.returncode == 0 and "parent done" in out.log, out.log
    time.sleep(4)
    assert not marker.exists(), "a double-forked daemon outlived the sandbox"


def test_address_space_limit_turns_a_huge_allocation_into_memory_error(tmp_path):
    out = run_sandboxed(python("b = bytearray(3 * 1024**3)"), workdir=tmp_path,
                        limits=limits(memory_limit_mb=1024, unsandboxed_ok=True))
    assert out.returncode == 1 and "MemoryError" in out.log


def test_memory_of_forked_children_counts_together(tmp_path):
    """Each child stays under the per-process limit; together they pass it."""
    code = ("import os, time\n"
            "for _ in range(4):\n"
            "    if os.fork() == 0:\n"
            "        block = bytearray(b'x') * (200 * 2**20)\n"
            "        time.sleep(60)\n"
            "time.sleep(60)\n")
    start = time.monotonic()
    out = run_sandboxed(python(code), workdir=tmp_path,
                        limits=limits(memory_limit_mb=600, unsandboxed_ok=True))
    assert out.memory_exceeded and out.signal_name == "SIGKILL", out.log
    assert "process(es), above the 600 MB limit" in out.limit_detail
    assert time.monotonic() - start < 25


def test_a_fork_loop_is_stopped_at_the_process_limit(tmp_path):
    code = ("import os, time\n"
            "for _ in range(2000):\n"
            "    if os.fork() == 0:\n"
            "        time.sleep(60); os._exit(0)\n"
            "time.sleep(60)\n")
    out = run_sandboxed(python(code), workdir=tmp_path, limits=limits(max_processes=64, unsandboxed_ok=True))
    assert out.processes_exceeded and not out.timed_out, out.log
    assert "more than 64 processes" in out.limit_detail


def test_segfault_is_contained(tmp_path):
    out = run_sandboxed(python("import faulthandler; faulthandler.enable(); faulthandler._sigsegv()"),
                        workdir=tmp_path, limits=limits(unsandboxed_ok=True))
    assert out.signal_name == "SIGSEGV" and "Fatal Python error" in out.log


def test_no_network_inside(backend, tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('CONNECTED')"
        isolated = run_sandboxed(python(code), workdir=tmp_path, limits=limits())
        shared = run_sandboxed(python(code), workdir=tmp_path, limits=limits(isolate_network=False))
    finally:
        server.close()
    assert isolated.network_isolated and "CONNECTED" not in isolated.log and isolated.returncode != 0
    assert not shared.network_isolated and "CONNECTED" in shared.log
    assert shared.isolation["sandbox"] == backend  # the rest of the sandbox stays


def test_without_a_sandbox_untrusted_code_is_refused(tmp_path, monkeypatch):
    force_backend(monkeypatch, "none")
    with pytest.raises(SandboxUnavailable, match="--unsafe-no-sandbox"):
        run_sandboxed(python("open('ran', 'w')"), workdir=tmp_path, limits=limits())
    assert not (tmp_path / "ran").exists()
    out = run_sandboxed(python("open('ran', 'w')"), workdir=tmp_path, limits=limits(unsandboxed_ok=True))
    assert out.returncode == 0 and (tmp_path / "ran").exists()
    assert out.isolation["sandbox"] == "none" and out.isolation["namespaces"] == []
    assert not out.network_isolated and "no sandbox works here" in out.network_note
