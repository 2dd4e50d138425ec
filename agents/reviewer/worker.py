"""The judge process of a review batch: `python -m kskill.agents.reviewer.worker JOB.json DEVICE MEMORY_MB`.

What the judge does, and why it is a process apart from the candidates, is said in judge.py. This
module is its start, with the standard library alone. The first runner is started before the
judge imports torch, so that the runner's imports (torch, triton, CUDA's context) overlap the
judge's instead of following them; seconds of every review batch went there. Then the judge
waits for its job: the kskill process may start a judge before the batch it will review exists
(a warm judge, batch.py), and writes JOB.json when the batch is ready. The job's key is out of
reach before any candidate code runs: the file is unlinked once read, and the runner loads no
candidate before the judge tells it to.
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import socket
import sys
from pathlib import Path

from kskill.agents.reviewer.channel import RunnerProcess
from kskill.agents.reviewer.protocol import RecordWriter, wait_for


def not_dumpable() -> str:
    """Close this process's memory to the runner (PR_SET_DUMPABLE 0); a note when the OS refused."""
    try:
        if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) == 0:
            return ""
    except (OSError, AttributeError):
        pass
    return "the judge could not make itself non-dumpable; its memory is as reachable as the runner's"


def main(argv: list[str] | None = None) -> int:
    faulthandler.enable()
    job_path, device, memory_limit_mb = (argv or sys.argv)[1:4]
    job_path = Path(job_path)
    note = not_dumpable()
    spare = RunnerProcess(job_path.parent / "runner-1.log", device, int(memory_limit_mb), watch_memory=device == "cuda")
    from kskill.agents.reviewer.judge import judge_batch, prepare  # torch, imported while the runner imports its own

    prepare(device)
    job = wait_for(job_path)
    records = RecordWriter(job["records_path"], job["key"])
    records.write("sandbox", env_names=sorted(os.environ), interfaces=[name for _, name in socket.if_nameindex()])
    if note:
        records.write("note", message=note)
    judge_batch(job, records, job_path.parent, spare)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # torch's exit handlers cost a second or more and nothing is left to save
