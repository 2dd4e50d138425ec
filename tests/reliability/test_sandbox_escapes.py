"""Fault suite, sandbox: every escape a hostile candidate tried, contained with no effect outside.

One candidate per sandbox tool tries every escape in escapes.py during a real review (CPU, a tiny
problem, static checks off so the code does run) against a real embedded store holding a graph.
Each test then checks one effect is absent on the host, the store or this process (the kskill
process here), and runs the same escape once without a sandbox to show that it does work there.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from fault_support import TINY_MODEL_NEW, TINY_PROBLEM, processes_with, skip_unless_tool_works

from kskill.agents.reviewer import Review, ReviewOptions, review, sandbox
from kskill.graph_schema.store import GraphStore, open_store

pytestmark = pytest.mark.reliability

ESCAPES = Path(__file__).with_name("escapes.py")


@dataclass
class Attack:
    backend: str
    targets: dict
    review: Review
    survivors: list[int]
    store: GraphStore
    secret: str

    def escaped(self, name: str) -> list[str]:
        return [line for line in self.review.log.splitlines() if line.startswith(f"ESCAPE {name}:")]


def targets_for(home: Path, tmp: Path, token: str, secret: str, parent_pid: int, graph: str) -> dict:
    from kskill.graph_schema.embedded import EmbeddedServer

    return {"socket": str(EmbeddedServer(home / "graph").socket_path), "graph": graph, "token": token,
            "secret": secret, "kskill_home": str(home), "victim_file": str(home / "keep.txt"),
            "outside_file": str(tmp / "env-dump.json"), "host_tmp_file": f"/tmp/kskill-escape-{token}.json",
            "home_file": str(Path.home() / f".kskill-escape-{token}"), "shm_file": f"/dev/shm/kskill-escape-{token}",
            "parent_pid": parent_pid}


def unsandboxed(name: str, targets: dict, secret: str) -> str:
    """The escape run as a plain script, with the secret in its environment: what no sandbox stops."""
    env = {**os.environ, "DB_URL": f"postgres://kskill:{secret}@db.example/prod"}
    with tempfile.TemporaryFile() as out:  # not a pipe: what outlives the script would hold it open
        subprocess.run([sys.executable, str(ESCAPES), json.dumps(targets), name], env=env, stdout=out,
                       stderr=subprocess.STDOUT, timeout=60)
        out.seek(0)
        return out.read().decode(errors="replace")


@pytest.fixture(scope="module", params=["bwrap", "unshare"])
def attack(request, tmp_path_factory):
    backend = request.param
    skip_unless_tool_works(backend)
    token, secret = f"kskill-escape-{secrets.token_hex(6)}", f"pw-{secrets.token_hex(8)}"
    home, tmp = tmp_path_factory.mktemp("escape-home"), tmp_path_factory.mktemp("escape-outside")
    store = open_store("embedded", home, graph_name="escapes")
    store.write("UNWIND range(1, 4) AS i CREATE (:Kept {i: i})")
    (home / "keep.txt").write_text("keep")
    targets = targets_for(home, tmp, token, secret, os.getpid(), "escapes")
    candidate = f"{ESCAPES.read_text()}\nrun({targets!r}, {list(_names())!r})\n{TINY_MODEL_NEW}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sandbox, "BACKENDS", (backend,))
        mp.setenv("DB_URL", f"postgres://kskill:{secret}@db.example/prod")
        sandbox.choose_sandbox.cache_clear()
        result = review(TINY_PROBLEM, candidate, ReviewOptions(device="cpu", trials=1, timing=False, profile=False,
                                                          static_checks=False, timeout_s=180,
                                                          hidden_paths=[str(home)]))
        survivors = processes_with(token)
    sandbox.choose_sandbox.cache_clear()
    yield Attack(backend, targets, result, survivors, store, secret)
    for pid in processes_with(token):
        os.kill(pid, 9)
    for key in ("host_tmp_file", "home_file", "shm_file"):
        Path(targets[key]).unlink(missing_ok=True)
    store.close()
    from kskill.graph_schema.embedded import EmbeddedServer

    EmbeddedServer(home / "graph").shutdown()


def _names() -> tuple[str, ...]:
    return ("graph_socket", "env_to_file", "write_home", "delete_kskill_home", "outlive", "proc_environ",
            "ptrace_parent", "write_shm")


def test_the_candidate_ran_in_the_sandbox_and_passed(attack):
    assert attack.review.passed, attack.review.failure_message
    assert attack.review.isolation.sandbox == attack.backend
    assert {"user", "mount", "pid", "net"} <= set(attack.review.isolation.namespaces)
    assert len([line for line in attack.review.log.splitlines() if line.startswith("ESCAPE ")]) >= 10


def test_graph_socket_is_out_of_reach(attack, tmp_path):
    assert attack.escaped("graph_socket") and "refused" in attack.escaped("graph_socket")[0]
    assert attack.store.run("MATCH (n:Kept) RETURN count(n) AS c")[0]["c"] == 4
    assert attack.store.run("MATCH (n:Escaped) RETURN count(n) AS c")[0]["c"] == 0
    control = {**attack.targets, "graph": "escape-control"}
    assert "connected" in unsandboxed("graph_socket", control, attack.secret)
    home = Path(attack.targets["kskill_home"])
    reached = open_store("embedded", home, graph_name="escape-control")
    try:
        assert reached.run("MATCH (n:Escaped) RETURN count(n) AS c")[0]["c"] == 1
    finally:
        reached.drop_graph()
        reached.close()


def test_environment_with_its_secret_is_written_nowhere(attack, tmp_path):
    assert attack.escaped("env_secret") == ["ESCAPE env_secret: absent"]
    assert not Path(attack.targets["outside_file"]).exists()
    assert not Path(attack.targets["host_tmp_file"]).exists()
    assert attack.secret not in attack.review.to_json()
    control = {**attack.targets, "outside_file": str(tmp_path / "env.json"),
               "host_tmp_file": str(tmp_path / "env2.json")}
    unsandboxed("env_to_file", control, attack.secret)
    assert attack.secret in (tmp_path / "env.json").read_text()


def test_home_is_not_writable(attack, tmp_path):
    assert attack.escaped("write_home") and "refused" in attack.escaped("write_home")[0]
    assert not Path(attack.targets["home_file"]).exists()
    unsandboxed("write_home", {**attack.targets, "home_file": str(tmp_path / "home-file")}, attack.secret)
    assert (tmp_path / "home-file").exists()


def test_files_under_kskill_home_survive(attack, tmp_path):
    assert attack.escaped("delete_kskill_home") and "refused" in attack.escaped("delete_kskill_home")[0]
    assert (Path(attack.targets["kskill_home"]) / "keep.txt").read_text() == "keep"
    assert attack.store.run("MATCH (n:Kept) RETURN count(n) AS c")[0]["c"] == 4  # the graph's files too
    victim_home = tmp_path / "other-home"
    victim_home.mkdir()
    (victim_home / "keep.txt").write_text("keep")
    unsandboxed("delete_kskill_home", {**attack.targets, "kskill_home": str(victim_home),
                                       "victim_file": str(victim_home / "keep.txt")}, attack.secret)
    assert not victim_home.exists()


def test_no_process_outlives_the_review(attack):
    assert attack.escaped("posix_spawn") and attack.escaped("fork_setsid")  # they were started
    assert attack.survivors == []
    token = attack.targets["token"] + "-control"
    unsandboxed("outlive", {**attack.targets, "token": token}, attack.secret)
    alive = processes_with(token)
    for pid in alive:
        os.kill(pid, 9)
    assert len(alive) == 2  # without a sandbox both outlive the script that started them


def test_the_kskill_process_environment_is_unreadable(attack):
    assert attack.escaped("proc_environ") == ["ESCAPE proc_environ: secret not readable"]
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                          env={**os.environ, "DB_URL": attack.secret}) as victim:
        try:
            seen = unsandboxed("proc_environ", {**attack.targets, "parent_pid": victim.pid}, attack.secret)
        finally:
            victim.kill()
    line = next(line for line in seen.splitlines() if line.startswith("ESCAPE proc_environ: secret read from "))
    assert victim.pid in json.loads(line.removeprefix("ESCAPE proc_environ: secret read from "))


def test_the_kskill_process_cannot_be_traced(attack):
    assert attack.escaped("ptrace") and not any("attached" in line for line in attack.escaped("ptrace"))
    status = Path("/proc/self/status").read_text()
    assert "TracerPid:\t0" in status
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as victim:
        try:
            seen = unsandboxed("ptrace_parent", {**attack.targets, "parent_pid": victim.pid}, attack.secret)
        finally:
            victim.kill()
    assert f"attached {victim.pid}" in seen


def test_dev_shm_is_private(attack, tmp_path):
    assert attack.escaped("write_shm") == [f"ESCAPE write_shm: wrote {attack.targets['shm_file']}"]
    assert not Path(attack.targets["shm_file"]).exists()  # it wrote its own /dev/shm, inside the workdir
    control = f"/dev/shm/kskill-escape-control-{secrets.token_hex(4)}"
    unsandboxed("write_shm", {**attack.targets, "shm_file": control}, attack.secret)
    assert Path(control).exists()
    Path(control).unlink()
