"""Compiled Triton kernels carried from one review batch to the next of the same run.

Each batch's sandbox compiles into its own workdir (TRITON_CACHE_DIR), so a child candidate that
keeps its parent's kernels would compile all of them again: on a network whose every normalization
is a kernel, that is most of a batch. With a kernel cache folder, the parent copies its entries into
a batch's cache before the batch and copies the batch's new entries back after it.

Triton finds a kernel's files through a group file (`__grp__<name>.json`) that names them by
absolute path, so a copied entry's group file is rewritten to name the copies; a group that names a
file the entry lacks is dropped, and Triton compiles that kernel again.

Only for trusted code (the recipe brain's): a candidate that can write its cache can plant a
compiled kernel that a later candidate loads. The copy itself trusts nothing it reads: entries
already present are never replaced, and only plain files and folders are copied (never a link,
which could point the next sandbox at a file of the host), up to a size budget.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

MAX_BYTES = 1 << 30  # the whole cache: past this, new entries are not kept


def _size(folder: Path) -> int | None:
    """Bytes of plain files under `folder`, or None if it holds anything else (a link, a device)."""
    total = 0
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            path = Path(root) / name
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                return None
            if path.is_file():
                total += path.stat().st_size
    return total


def copy_new(source: Path, target: Path, max_bytes: int = MAX_BYTES) -> int:
    """Copy the entries (top-level folders) of `source` that `target` lacks; how many were copied."""
    if not source.is_dir() or source.is_symlink():
        return 0
    target.mkdir(parents=True, exist_ok=True)
    used = _size(target) or 0
    copied = 0
    for entry in sorted(source.iterdir()):
        if entry.name.startswith(".") or entry.is_symlink() or not entry.is_dir() or (target / entry.name).exists():
            continue
        size = _size(entry)
        if size is None or used + size > max_bytes:
            continue
        partial = target / f".{entry.name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(entry, partial, symlinks=True)
        for group in partial.glob("__grp__*.json"):
            _point_group_at(group, target / entry.name)
        os.replace(partial, target / entry.name)
        used += size
        copied += 1
    return copied


def _point_group_at(group: Path, entry: Path) -> None:
    """Rewrite a group file's paths to the files of the same names in `entry` (where the copy will
    be), or remove it if one of them is missing there or it cannot be read."""
    try:
        children = json.loads(group.read_text())["child_paths"]
        moved = {name: str(entry / Path(path).name) for name, path in children.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        group.unlink()
        return
    if all((group.parent / Path(path).name).is_file() for path in moved.values()):
        group.write_text(json.dumps({"child_paths": moved}))
    else:
        group.unlink()
