"""The sandbox contains what the child does: time, memory, secrets, network, crashes."""

import socket
import sys
import time

import pytest

from kskill.agents.reviewer.sandbox import SandboxLimits, network_namespace_prefix, run_sandboxed, scrubbed_environment


def limits(**kw) -> SandboxLimits:
    base = dict(timeout_s=20, memory_limit_mb=1024, address_space_limit=True, isolate_network=True)
    return SandboxLimits(**{**base, **kw})


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_secret_names_are_dropped():
    env, dropped = scrubbed_environment({"OPENAI_API_KEY": "x", "GH_TOKEN": "y", "db_password": "z",
                                         "AWS_SECRET_ACCESS_KEY": "w", "PATH": "/bin"}, {"A": "1"})
    assert env == {"PATH": "/bin", "A": "1"}
    assert dropped == ["AWS_SECRET_ACCESS_KEY", "GH_TOKEN", "OPENAI_API_KEY", "db_password"]


def test_child_sees_no_secrets_and_its_own_temp_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KSKILL_TEST_API_KEY", "do-not-leak")
    out = run_sandboxed(python("import os, tempfile; print(sorted(k for k in os.environ if 'KEY' in k)); "
                               "print(tempfile.gettempdir()); print(os.environ['TORCH_EXTENSIONS_DIR'])"),
                        workdir=tmp_path, limits=limits())
    assert out.returncode == 0, out.log
    assert "do-not-leak" not in out.log and "[]" in out.log
    assert str(tmp_path / "tmp") in out.log and str(tmp_path / "build") in out.log
    assert "KSKILL_TEST_API_KEY" in out.dropped_env


def test_timeout_kills_the_whole_process_group(tmp_path):
    marker = tmp_path / "grandchild-survived"
    (tmp_path / "grandchild.py").write_text(f"import time\ntime.sleep(4)\nopen({str(marker)!r}, 'w').close()\n")
    code = ("import subprocess, sys, time; subprocess.Popen([sys.executable, 'grandchild.py']); time.sleep(60)")
    start = time.monotonic()
    out = run_sandboxed(python(code), workdir=tmp_path, limits=limits(timeout_s=1.5))
    assert out.timed_out and time.monotonic() - start < 10, out.log
    time.sleep(5)
    assert not marker.exists(), "a process of the timed-out group outlived the kill"


def test_address_space_limit_turns_a_huge_allocation_into_memory_error(tmp_path):
    out = run_sandboxed(python("b = bytearray(3 * 1024**3)"), workdir=tmp_path, limits=limits(memory_limit_mb=1024))
    assert out.returncode == 1 and "MemoryError" in out.log


def test_resident_memory_watch_stops_a_growing_child(tmp_path):
    code = "h = []\nwhile True:\n    h.append(bytearray(64 * 1024**2))"
    out = run_sandboxed(python(code), workdir=tmp_path, limits=limits(memory_limit_mb=400, address_space_limit=False))
    assert out.memory_exceeded and out.signal_name == "SIGKILL"


def test_segfault_is_contained(tmp_path):
    out = run_sandboxed(python("import faulthandler; faulthandler.enable(); faulthandler._sigsegv()"),
                        workdir=tmp_path, limits=limits())
    assert out.signal_name == "SIGSEGV" and "Fatal Python error" in out.log


def test_no_network_inside_when_unshare_works(tmp_path):
    prefix, note = network_namespace_prefix()
    if not prefix:
        pytest.skip(f"this machine cannot create network namespaces: {note}")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('CONNECTED')"
        isolated = run_sandboxed(python(code), workdir=tmp_path, limits=limits())
        open_net = run_sandboxed(python(code), workdir=tmp_path, limits=limits(isolate_network=False))
    finally:
        server.close()
    assert isolated.network_isolated and "CONNECTED" not in isolated.log and isolated.returncode != 0
    assert not open_net.network_isolated and "CONNECTED" in open_net.log
