"""The embedded store's data directory: its marker, its socket path and its bounded log.

The marker (`kskill-store.json`) says that kskill owns the directory, which store format it
holds, and how many nodes the store held the last time kskill saw it. That count is how a
store whose append-only files were deleted or emptied is told apart from a new one: redis
would start either as an empty database without a word.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .errors import StoreUnavailable

MARKER = "kskill-store.json"
STORE_FORMAT = 1
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux
LOG_LIMIT_BYTES = 1 << 20  # server.log is rotated at start once past this (one old copy kept)


@dataclass(frozen=True)
class Marker:
    format: int
    nodes: int = 0  # nodes in all graphs when kskill last recorded them
    recorded_at: str = ""


def prepare(data_dir: Path) -> Marker:
    """Create or validate the data directory and return its marker (private to the user)."""
    try:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreUnavailable(
            f"cannot create {data_dir} ({exc.strerror}); set KSKILL_HOME to a writable directory"
        ) from exc
    if not os.access(data_dir, os.W_OK):
        raise StoreUnavailable(
            f"{data_dir} is not writable; set KSKILL_HOME to a writable directory (now {data_dir.parent})"
        )
    _make_private(data_dir)
    # One listing answers both questions: whether the marker is there (whole: `write_marker` links a finished file),
    # and what else is; a separate check before it left a window in which another process's marker looked foreign.
    names = [p.name for p in data_dir.iterdir()]
    if MARKER in names:
        return read_marker(data_dir)
    # A lock, or the marker another process is writing right now (`write_marker`'s temporary file), is ours.
    foreign = [name for name in names
               if not name.endswith(".lock") and not (name.startswith(MARKER + ".") and name.endswith(".tmp"))]
    if foreign:
        raise StoreUnavailable(
            f"{data_dir} is not a kskill data directory (it holds {', '.join(sorted(foreign)[:3])}); "
            "point KSKILL_HOME elsewhere or empty that directory"
        )
    marker = Marker(STORE_FORMAT)
    if not write_marker(data_dir, marker, replace=False):  # another process created it first: read theirs
        return read_marker(data_dir)
    return marker


def read_marker(data_dir: Path) -> Marker:
    path = data_dir / MARKER
    try:
        raw = json.loads(path.read_text())
        marker = Marker(format=raw.get("format"), nodes=int(raw.get("nodes", 0)),
                        recorded_at=str(raw.get("recorded_at", "")))
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        raise StoreUnavailable(
            f"{path} is corrupt; this directory was not written by kskill or was damaged: "
            "move it aside and run `kskill graph init` (or import an export)"
        ) from exc
    if marker.format != STORE_FORMAT:
        raise StoreUnavailable(
            f"{data_dir} holds store format {marker.format!r}, this kskill reads format {STORE_FORMAT}; "
            "use the kskill version that wrote it to export the graph"
        )
    return marker


def record_nodes(data_dir: Path, nodes: int) -> None:
    """Remember how much the store holds (written atomically: a crash leaves the old marker)."""
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    write_marker(data_dir, Marker(STORE_FORMAT, nodes, now))


def write_marker(data_dir: Path, marker: Marker, replace: bool = True) -> bool:
    """Write the marker atomically (a crash leaves the old one or none). `replace=False` creates it only where none
    exists yet, and says whether it did: processes that start on a new directory at once write it once."""
    path = data_dir / MARKER
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps({"format": marker.format, "nodes": marker.nodes, "recorded_at": marker.recorded_at}))
    if replace:
        tmp.replace(path)
        return True
    try:
        os.link(tmp, path)  # fails where the marker exists, unlike a rename
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


def rotate_log(log_path: Path, limit: int = LOG_LIMIT_BYTES) -> None:
    """Keep server.log bounded: past `limit`, it becomes server.log.1 (replacing the older one).

    Called only while no server runs, so no process holds the file open."""
    try:
        if log_path.stat().st_size > limit:
            log_path.replace(log_path.with_name(log_path.name + ".1"))
    except FileNotFoundError:
        pass


def socket_path(data_dir: Path) -> Path:
    """The server's Unix socket: inside the data directory, or a private folder in the temp dir
    when a deep KSKILL_HOME would overflow sun_path."""
    preferred = data_dir / "falkordb.sock"
    if len(str(preferred)) <= MAX_SOCKET_PATH:
        return preferred
    digest = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"kskill-{os.getuid()}-{digest}" / "falkordb.sock"


def prepare_socket_dir(socket: Path) -> None:
    """Make the socket's folder exist and belong to this user alone (0700), or refuse."""
    folder = socket.parent
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
    except OSError as exc:
        raise StoreUnavailable(f"cannot create the socket folder {folder} ({exc.strerror})") from exc
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise StoreUnavailable(
            f"{folder} is not a folder of this user; remove it or set KSKILL_HOME to a shorter path"
        )
    _make_private(folder)


def _make_private(folder: Path) -> None:
    # Only the owner may reach the server's socket and files; other users get nothing.
    try:
        if folder.stat().st_mode & 0o077:
            folder.chmod(0o700)
    except OSError:
        pass  # not ours to change (a shared mount): the socket itself is still 0700
