"""What the kskill process and the review worker tell each other, and how it is kept honest.

The kskill process writes a job file for the worker (the judge, worker.py) and reads back a
stream of records: one JSON line each, appended to a file the kskill process opened before the
judge read its job. Each line carries an HMAC-SHA256 of its payload under a key that only the two of
them hold: the job file that carries it is deleted before any candidate code starts, and the
judge unlinks the record file's name once it has opened it, so the candidate's process can
neither find the file nor sign a line. A line that fails the check is ignored.

Standard library only: this module is imported inside the sandbox, where only torch, triton
and the standard library can be relied on.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from pathlib import Path
from typing import Any

# Seeds, as offsets from the review's seed: trial k draws seed + k, and each other use has its own
# range, so no two uses ever see the same inputs.
TIMING_SEED, PROFILE_SEED, NCU_SEED = 100, 200, 300
VARIANT_SEED, ABLATION_SEED = 500, 700
VERIFY_SEED, EXCESSIVE_SEED = 10_000, 20_000
NCU_SPENT_MARK = "kskill-ncu-target-spent "  # the log line where the ncu target says where its time went


def _mac(key: bytes, body: str) -> str:
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


class RecordWriter:
    """The judge's side: signed records appended to an already opened file descriptor."""

    def __init__(self, path: str, key_hex: str) -> None:
        self.key = bytes.fromhex(key_hex)
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        os.unlink(path)  # the kskill process reads through its own descriptor; nobody else finds the file
        self.seq = 0

    def write(self, kind: str, **payload: Any) -> None:
        self.seq += 1
        body = json.dumps({"type": kind, "seq": self.seq, **payload}, default=str, sort_keys=True)
        os.write(self.fd, (json.dumps({"body": body, "mac": _mac(self.key, body)}) + "\n").encode())


class RecordReader:
    """The kskill process's side: reads new complete lines and keeps those whose signature holds."""

    def __init__(self, path: str, key_hex: str) -> None:
        self.key = bytes.fromhex(key_hex)
        self.file = open(path, "rb")  # opened before the judge starts (it unlinks the name)
        self.pending = b""
        self.last_seq = 0

    def read(self) -> list[dict[str, Any]]:
        self.pending += self.file.read()
        *lines, self.pending = self.pending.split(b"\n")
        records = []
        for line in lines:
            record = self._verified(line)
            if record is not None and record.get("seq", 0) > self.last_seq:
                self.last_seq = record["seq"]  # a replayed line is not news
                records.append(record)
        return records

    def _verified(self, line: bytes) -> dict[str, Any] | None:
        try:
            outer = json.loads(line)
            body = outer["body"]
            if not hmac.compare_digest(_mac(self.key, body), str(outer["mac"])):
                return None
            record = json.loads(body)
        except (ValueError, KeyError, TypeError):
            return None
        return record if isinstance(record, dict) else None

    def close(self) -> None:
        self.file.close()


# --- where the time goes -------------------------------------------------------------------------

class Stopwatch:
    """Seconds per named step, summed: `lap("step")` charges the time since the last lap to "step".

    `settle` (a device synchronize) runs before each lap, so work queued on a GPU is charged to the
    step that queued it, not to whichever step waits for it next. It is only used where nothing is
    being timed for the verdict: checking outputs, never the timing phase itself.
    """

    def __init__(self, settle: Any = None) -> None:
        self.settle = settle
        self.spent: dict[str, float] = {}
        self.last = time.perf_counter()

    def lap(self, step: str) -> None:
        if self.settle is not None:
            self.settle()
        now = time.perf_counter()
        self.spent[step] = self.spent.get(step, 0.0) + now - self.last
        self.last = now

    def add(self, spent: Any, prefix: str = "") -> None:
        """Another stopwatch's steps (a reply's, say), under a prefix; malformed entries are skipped."""
        for step, seconds in (spent.items() if isinstance(spent, dict) else ()):
            if isinstance(seconds, (int, float)) and 0 <= seconds < 1e6:
                key = prefix + str(step)[:40]
                self.spent[key] = self.spent.get(key, 0.0) + float(seconds)

    def take(self) -> dict[str, float]:
        """The steps so far, rounded, and a fresh start."""
        spent, self.spent = {k: round(v, 4) for k, v in self.spent.items()}, {}
        return spent


# --- job files ---------------------------------------------------------------------------------
# A sandboxed process may start before its job exists (a warm judge, a waiting Nsight Compute
# target): it waits for the file, which the kskill process writes whole and renames into place.
JOB_POLL_S = 0.005


def put_in_place(path: Path, text: str) -> None:
    """Write a file whole under a temporary name, then rename it: a reader waiting for it never sees half."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    os.replace(partial, path)


def wait_for(path: Path) -> dict[str, Any]:
    """The job, once the kskill process has put it in place; the file is gone when this returns."""
    while not path.exists():
        time.sleep(JOB_POLL_S)
    job = json.loads(path.read_text())
    path.unlink()
    return job
