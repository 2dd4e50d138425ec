"""Compiled kernels carried between review batches: new entries only, plain files only, a size budget."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kskill.agents.reviewer.kernel_cache import copy_new


def entry(root: Path, name: str, data: bytes = b"cubin") -> Path:
    """A cache entry as Triton writes one: the files, and a group file naming them by absolute path."""
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "kernel.cubin").write_bytes(data)
    (folder / "kernel.json").write_text("{}")
    group = {"kernel.cubin": str(folder / "kernel.cubin"), "kernel.json": str(folder / "kernel.json")}
    (folder / "__grp__kernel.json").write_text(json.dumps({"child_paths": group}))
    return folder


def group(folder: Path) -> dict:
    return json.loads((folder / "__grp__kernel.json").read_text())["child_paths"]


def test_new_entries_are_copied_and_present_ones_never_replaced(tmp_path):
    cache, batch = tmp_path / "cache", tmp_path / "batch"
    entry(cache, "aaa", b"first")
    entry(batch, "aaa", b"planted")
    entry(batch, "bbb")
    assert copy_new(batch, cache) == 1
    assert (cache / "aaa" / "kernel.cubin").read_bytes() == b"first"
    assert (cache / "bbb" / "kernel.cubin").read_bytes() == b"cubin"
    assert copy_new(cache, tmp_path / "next") == 2  # into the next batch's empty cache
    # Triton finds the files through the group file: it names the copies, not the folder copied from
    assert group(tmp_path / "next" / "bbb") == {"kernel.cubin": str(tmp_path / "next" / "bbb" / "kernel.cubin"),
                                               "kernel.json": str(tmp_path / "next" / "bbb" / "kernel.json")}


def test_a_group_naming_a_file_the_entry_lacks_is_dropped(tmp_path):
    batch, cache = tmp_path / "batch", tmp_path / "cache"
    (entry(batch, "half") / "kernel.json").unlink()
    (entry(batch, "garbled") / "__grp__kernel.json").write_text("not json")
    assert copy_new(batch, cache) == 2
    assert not (cache / "half" / "__grp__kernel.json").exists() and (cache / "half" / "kernel.cubin").exists()
    assert not (cache / "garbled" / "__grp__kernel.json").exists()


def test_links_and_entries_holding_links_are_left_behind(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("host file")
    batch, cache = tmp_path / "batch", tmp_path / "cache"
    os.symlink(secret, entry(batch, "inner") / "kernel.ptx")
    batch.joinpath("outer").symlink_to(tmp_path)
    entry(batch, "plain")
    assert copy_new(batch, cache) == 1
    assert sorted(p.name for p in cache.iterdir()) == ["plain"]


def test_the_size_budget_stops_new_entries(tmp_path):
    batch, cache = tmp_path / "batch", tmp_path / "cache"
    entry(batch, "big", b"x" * 1000)
    entry(batch, "small", b"x" * 10)
    assert copy_new(batch, cache, max_bytes=500) == 1 and [p.name for p in cache.iterdir()] == ["small"]
    assert copy_new(tmp_path / "missing", cache) == 0
