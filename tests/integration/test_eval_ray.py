"""`kskill eval --ray ADDRESS` against a real local Ray cluster (a head with two CPU slots, started
here and stopped by its process group), correctness-only on two small problems."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'kskill[ray]')")

PROBLEMS = Path(__file__).parents[1] / "fixtures" / "reviewer" / "problems"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ray_head(tmp_path_factory: pytest.TempPathFactory):
    """`ray start --head --block` in a session of its own; its whole group is stopped afterwards."""
    port = free_port()
    temp = Path(tempfile.mkdtemp(prefix="kr-", dir="/tmp"))  # Ray's socket paths must stay short
    env = {**os.environ, "KSKILL_HOME": str(tmp_path_factory.getbasetemp() / "kskill-home"),
           "RAY_USAGE_STATS_ENABLED": "0"}
    ray_cli = Path(sys.executable).with_name("ray")
    log = open(temp / "head.log", "w")
    head = subprocess.Popen([str(ray_cli), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
                             f"--port={port}", "--num-cpus=2", "--num-gpus=0", "--include-dashboard=false",
                             "--disable-usage-stats", f"--temp-dir={temp}"], env=env, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    address = f"127.0.0.1:{port}"
    try:  # the head is stopped however the wait for it ends
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            status = subprocess.run([str(ray_cli), "status", "--address", address], capture_output=True, text=True,
                                    env=env, timeout=60)
            if status.returncode == 0 and "2.0 CPU" in status.stdout:
                break
            assert head.poll() is None, (temp / "head.log").read_text()[-2000:]
            time.sleep(2)
        else:
            pytest.fail("the Ray head did not come up in 180 s")
        yield address, env
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=5)  # Ray's orderly stop took 33 s in CI; the cluster is thrown away anyway
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def test_problems_run_as_ray_tasks_on_a_local_cluster(ray_head, tmp_path):
    address, env = ray_head
    suite = tmp_path / "suite" / "level1"
    suite.mkdir(parents=True)
    shutil.copy(PROBLEMS / "relu.py", suite / "1_relu.py")
    shutil.copy(PROBLEMS / "add.py", suite / "2_add.py")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "kskill", "eval", str(suite), "--ray", address, "--device", "cpu", "--iterations", "1",
         "--out", str(out), "--optimize-option=--retrieval=lexical", "--optimize-option=--trials=1", "--json"],
        capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["finished"] == 2
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [r["problem"] for r in rows] == ["level1/1_relu", "level1/2_add"]
    for r in rows:
        assert r["status"] == "done" and r["correct_strict"], r
        assert r["engine"].startswith("ray node "), "ran inside a Ray worker, not in the driver"
        assert not r["timings_representative"]
    assert (out / "problems" / "level1__1_relu" / "run" / "model_new.py").is_file()
