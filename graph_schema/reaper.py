"""The watcher beside an embedded graph server: it stops the server once no kskill process holds it.

Clients hold a shared lock on `clients.lock` while they use the server, and the last to leave stops it
(embedded_server.py). A client killed before it could leave (SIGKILL, an out-of-memory kill, an interrupted test
worker) leaves no lock behind, since the kernel drops it with the process, but its server ran on until the next
kskill process came and left. The reaper, started with the server, looks every POLL_S seconds; when it can take
`clients.lock` exclusively under `server.lock`, nobody uses the server, and it does what the last client does
(records the counts, folds a grown log, stops the server: EmbeddedServer.stop_if_unused). It follows a restarted
server and exits once none runs. One reaper a data directory (`reaper.lock`).

Run by the server's starter as `python -m kskill.graph_schema.reaper DATA_DIR`; its words go to the server's log.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path

from .processes import alive, read_pid, try_lock_fd

POLL_S = 5.0
CLAIM_S = 10.0  # a reaper started while the previous one exits waits this long for its lock


def watch(data_dir: Path, poll_s: float = POLL_S) -> str:
    """Watch the server of `data_dir` until it stops; returns why the watch ended."""
    lock = _claim(data_dir / "reaper.lock")
    if lock is None:
        return "another reaper watches this server"
    try:
        while True:
            time.sleep(poll_s)
            if not data_dir.is_dir() or not alive(read_pid(data_dir / "server.pid")):
                return "the server stopped"
            from .embedded_server import EmbeddedServer  # only now: a reaper mostly sleeps

            if EmbeddedServer(data_dir, notify=_logger(data_dir)).stop_if_unused():
                return "stopped the server: no kskill process used it"
    finally:
        os.close(lock)


def _claim(path: Path) -> int | None:
    deadline = time.monotonic() + CLAIM_S
    while (fd := try_lock_fd(path, fcntl.LOCK_EX)) is None:
        if time.monotonic() > deadline:
            return None
        time.sleep(0.2)
    return fd


def _logger(data_dir: Path):
    def log(message: str) -> None:
        with open(data_dir / "server.log", "a", encoding="utf-8") as out:
            out.write(f"kskill reaper: {message}\n")
    return log


def main() -> None:
    data_dir = Path(sys.argv[1])
    try:
        said = watch(data_dir)
    except Exception as exc:  # noqa: BLE001 (a watcher has nobody to raise to: its log says what went wrong)
        said = f"gave up watching: {type(exc).__name__}: {exc}"
    if data_dir.is_dir() and not said.startswith("another"):
        _logger(data_dir)(said)


if __name__ == "__main__":
    main()
