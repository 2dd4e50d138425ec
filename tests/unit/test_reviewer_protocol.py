"""The pieces between the kskill process, the judge and the runner: signed records, output transfer,
the judge's reading of the runner's timings, and what the sandboxed modules import."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from kskill.agents.reviewer import nsight
from kskill.agents.reviewer.protocol import NCU_SPENT_MARK, RecordReader, RecordWriter, Stopwatch
from kskill.agents.reviewer.timing import timing_problems
from kskill.agents.reviewer.transfer import OutputReceiver, OutputSender, TransferError, Unsendable, _take_fd


def test_records_are_read_as_they_come_and_forged_ones_are_dropped(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"")
    reader = RecordReader(str(path), "ab" * 32)
    writer = RecordWriter(str(path), "ab" * 32)
    assert not path.exists()  # the judge unlinks the name: only open descriptors reach the file
    writer.write("verdict", index=0, final=True, data={"correct": False})
    os.write(writer.fd, json.dumps({"body": json.dumps({"type": "verdict", "seq": 5, "index": 1}),
                                    "mac": "0" * 64}).encode() + b"\n")
    records = reader.read()
    assert [(r["type"], r["index"]) for r in records] == [("verdict", 0)]
    writer.write("done")
    os.write(writer.fd, b'{"body": "half a line')  # waits for its end, and then fails the check
    assert [r["type"] for r in reader.read()] == ["done"]
    reader.close()


def test_a_replayed_record_is_not_news(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"")
    reader = RecordReader(str(path), "cd" * 32)
    writer = RecordWriter(str(path), "cd" * 32)
    writer.write("phase", index=0, phase="correctness")
    first = reader.read()
    with open(f"/proc/self/fd/{reader.file.fileno()}", "rb") as again:
        line = again.readline()
    os.write(writer.fd, line)
    assert len(first) == 1 and reader.read() == []


def test_outputs_travel_through_files_and_only_matching_shapes_are_read(tmp_path):
    sender, receiver = OutputSender(tmp_path, "file"), OutputReceiver(tmp_path)
    out = (torch.arange(12.0).view(3, 4).t(), torch.tensor([True, False]), 3, object())
    expected = [torch.zeros(4, 3), torch.zeros(2, dtype=torch.bool), 3, 0]
    got = receiver.receive(sender.send(out), expected)
    assert torch.equal(got[0], out[0]) and torch.equal(got[1], out[1]) and got[2] == 3
    assert isinstance(got[3], Unsendable)
    assert list(tmp_path.iterdir()) == []  # read and removed
    wrong = receiver.receive(sender.send(torch.ones(5)), [torch.zeros(4)])
    assert wrong[0].is_meta and list(wrong[0].shape) == [5]


def test_the_judge_refuses_descriptors_it_cannot_trust(tmp_path):
    receiver = OutputReceiver(tmp_path)
    want = [torch.zeros(2)]
    for bad in ({"kind": "file", "dtype": "float32", "shape": [2], "name": "../../etc/passwd"},
                {"kind": "file", "dtype": "object", "shape": [2], "name": "out-1.bin"},
                {"kind": "file", "dtype": "float32", "shape": [-1], "name": "out-1.bin"},
                {"kind": "file", "dtype": "float32", "shape": [2], "name": "out-2.bin"}):
        with pytest.raises(TransferError):
            receiver.receive([bad], want)
    (tmp_path / "out-3.bin").write_bytes(b"\0" * 4)  # shorter than two floats
    with pytest.raises(TransferError, match="holds 4 bytes"):
        receiver.receive([{"kind": "file", "dtype": "float32", "shape": [2], "name": "out-3.bin"}], want)


def test_shared_allocations_are_matched_to_their_outputs_and_strays_are_closed():
    judge_end, runner_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    inodes, open_before = [], len(os.listdir("/proc/self/fd"))
    for tag in (b"1", b"2", b"3"):
        r, w = os.pipe()
        os.close(w)
        socket.send_fds(runner_end, [tag], [r])
        inodes.append(os.fstat(r).st_ino)
        os.close(r)
    got = _take_fd(judge_end, 2)  # output 1 was never opened (a wrong shape): its descriptor is closed
    assert os.fstat(got).st_ino == inodes[1]
    assert len(os.listdir("/proc/self/fd")) == open_before + 1
    os.close(got)
    with pytest.raises(TransferError, match="allocation b'3' where output 2"):
        _take_fd(judge_end, 2)  # the runner skipped one: refused, not waited for
    with pytest.raises(TransferError, match="no allocation for output 4"):
        _take_fd(judge_end, 4)
    r, w = os.pipe()
    socket.send_fds(runner_end, [b"7"], [r])
    os.close(r)
    os.close(w)
    open_before = len(os.listdir("/proc/self/fd"))
    wrong = OutputReceiver(Path(".")).receive([{"kind": "cuda_fd", "dtype": "float32", "shape": [3], "seq": 7}],
                                              [torch.zeros(2)], judge_end)
    assert wrong[0].is_meta  # never mapped, and its allocation is not left in the socket
    assert len(os.listdir("/proc/self/fd")) == open_before
    with pytest.raises(TransferError, match="no allocation for output 7"):
        _take_fd(judge_end, 7)
    runner_end.close()
    with pytest.raises(TransferError):
        _take_fd(judge_end, 5)
    receiver = OutputReceiver(Path("."))
    with pytest.raises(TransferError, match="without its allocation"):
        receiver.receive([{"kind": "cuda_fd", "dtype": "float32", "shape": [2], "seq": 1}], [torch.zeros(2)])
    judge_end.close()


def stats(median: float) -> dict:
    return {"median_ms": median, "mean_ms": median, "std_ms": 0.0, "min_ms": median, "max_ms": median,
            "p20_ms": median, "p80_ms": median, "n": 20}


def test_timings_the_profiler_does_not_confirm_are_rejected():
    reply = {"stats": {"reference": stats(1.0), "c0": stats(0.5), "c1": stats(0.05), "c2": stats(0.1)},
             "device": {"reference": {"ms": 0.9}, "c0": {"ms": 0.45, "names": ["relu_kernel"]},
                        "c1": {"ms": 0.8, "names": ["relu_kernel"]}, "c2": {"ms": 0.0, "names": []}},
             "reused": {"reference": False, "c0": False, "c1": False, "c2": True}, "wall_ms": {}}
    found = {(i, code) for i, code, _, severity in
             timing_problems(reply, [0, 1, 2], True, 1.0, {0: [], 1: [], 2: ["my_cuda_kernel"]})}
    assert (0, "timing_unconfirmed") not in found
    assert (1, "timing_unconfirmed") in found
    assert {(2, "no_gpu_work"), (2, "outputs_reused"), (2, "kernel_not_launched")} <= found


def test_a_reference_slowed_beside_the_candidates_is_noticed():
    reply = {"stats": {"reference": stats(3.0), "c0": stats(1.0)}, "device": {}, "reused": {}}
    assert [code for _, code, _, _ in timing_problems(reply, [0], True, 1.0, {})] == ["reference_slowed"]
    assert timing_problems(reply, [0], False, None, {}) == []  # CPU timings are not judged


def test_the_sandboxed_modules_need_only_torch_and_the_standard_library():
    """The GPU image has torch and triton; pydantic, yaml and the graph client stay out of the worker."""
    code = ("import sys; import kskill.agents.reviewer.worker, kskill.agents.reviewer.judge, kskill.agents.reviewer.runner; "
            "print(sorted({'pydantic', 'yaml', 'click', 'falkordb', 'redis'} & {m.split('.')[0] for m in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_stopwatch_charges_each_lap_to_its_step_and_folds_in_another_account():
    watch = Stopwatch()
    time.sleep(0.02)
    watch.lap("first")
    watch.lap("second")
    watch.lap("first")
    watch.add({"call": 0.5, "bad": "x", "negative": -1.0, "huge": 1e9}, "run.")
    spent = watch.take()
    assert set(spent) == {"first", "second", "run.call"}  # malformed entries of the other account are dropped
    assert spent["first"] >= 0.02 and spent["second"] < spent["first"] and spent["run.call"] == 0.5
    assert watch.take() == {}


def test_the_ncu_targets_account_is_read_from_its_log():
    log = ("==PROF== Connected to process 12\n"
           f"{NCU_SPENT_MARK}{{\"setup\": 1.5, \"warmup\": 0.25}}\n==PROF== Disconnected from process 12\n")
    assert nsight.target_spent(log) == {"setup": 1.5, "warmup": 0.25}
    assert nsight.target_spent("no such line") == {}
    assert nsight.target_spent(f"{NCU_SPENT_MARK}not json") == {}
