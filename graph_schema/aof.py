"""The embedded server's append-only files, read without the server: what they hold, how big
they are, and whether the last one ends in the middle of a write.

Redis keeps its persistence in `appendonlydir/`: a manifest naming a base file (an RDB
snapshot, after a rewrite) and incremental files of RESP commands appended since. kskill
checks the last incremental file before every start. A crash (or a full disk) can leave it
ending inside a command or inside a MULTI block; redis would then drop that tail silently
(`aof-load-truncated yes`) or refuse to start (`no`). kskill runs it with `no`, cuts the
damaged tail here after keeping a copy of the whole file, and says so with the copy's path.
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

AOF_DIR = "appendonlydir"
MANIFEST = "appendonly.aof.manifest"
BACKUP_DIR = "aof-backups"
# Commands whose replay FalkorDB answers with errors once the schema exists (see compact()).
SCHEMA_MARKS = (b"GRAPH.CONSTRAINT", b"CREATE INDEX", b"DROP INDEX")


@dataclass(frozen=True)
class AofPart:
    path: Path
    kind: str  # "b" base (RDB or AOF), "i" incremental, "h" history (awaiting deletion)

    @property
    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0


@dataclass(frozen=True)
class TailDamage:
    """The last incremental file ends inside a command (or a MULTI block) at `valid_bytes`."""

    path: Path
    valid_bytes: int
    total_bytes: int
    in_multi: bool


class AofFormatError(ValueError):
    """An incremental file that is damaged before its end: not a tail that can be cut."""


def aof_dir(data_dir: Path) -> Path:
    return data_dir / AOF_DIR


def parts(data_dir: Path) -> list[AofPart]:
    """The files the manifest names, in order (history files left out); [] without a manifest."""
    folder = aof_dir(data_dir)
    try:
        lines = (folder / MANIFEST).read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    found = []
    for line in lines:
        words = shlex.split(line)
        if len(words) < 2 or words[0] != "file":
            continue
        fields = dict(zip(words[2::2], words[3::2]))
        if fields.get("type") in ("b", "i"):
            found.append(AofPart(folder / words[1], fields["type"]))
    return found


def total_size(data_dir: Path) -> int:
    return sum(p.size for p in parts(data_dir))


def incremental_size(data_dir: Path) -> int:
    return sum(p.size for p in parts(data_dir) if p.kind == "i")


def base_size(data_dir: Path) -> int:
    return sum(p.size for p in parts(data_dir) if p.kind == "b")


def holds_nothing(data_dir: Path) -> bool:
    """True when there is no manifest, or every file it names is missing or empty.

    A fresh server's base file is an RDB of an empty keyspace (about 100 bytes), so a base
    alone counts as empty unless the incremental files hold commands.
    """
    found = parts(data_dir)
    if not found:
        return True
    if any(not p.path.exists() for p in found):
        return True
    return all(p.size == 0 for p in found if p.kind == "i") and all(p.size < 200 for p in found if p.kind == "b")


def has_schema_commands(data_dir: Path) -> bool:
    """Whether an incremental file records index or constraint changes (a cheap byte scan)."""
    for part in parts(data_dir):
        if part.kind != "i":
            continue
        try:
            data = part.path.read_bytes()
        except OSError:
            continue
        if any(mark in data for mark in SCHEMA_MARKS):
            return True
    return False


def find_tail_damage(data_dir: Path) -> TailDamage | None:
    """Parse the last incremental file; None when it ends on a whole command outside MULTI."""
    incremental = [p for p in parts(data_dir) if p.kind == "i"]
    if not incremental or not incremental[-1].path.exists():
        return None
    path = incremental[-1].path
    data = path.read_bytes()
    valid, in_multi = _last_clean_offset(data)
    if valid == len(data):
        return None
    return TailDamage(path, valid, len(data), in_multi)


def cut_tail(data_dir: Path, damage: TailDamage) -> Path:
    """Keep a copy of the damaged file under aof-backups/, then cut it to its last whole write."""
    backups = data_dir / BACKUP_DIR
    backups.mkdir(mode=0o700, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    backup = backups / f"{damage.path.name}.{stamp}.{os.getpid()}"
    shutil.copy2(damage.path, backup)
    with open(damage.path, "r+b") as handle:
        handle.truncate(damage.valid_bytes)
        handle.flush()
        os.fsync(handle.fileno())
    return backup


def commands(data: bytes) -> list[list[bytes]]:
    """Every whole command in an incremental file's bytes (for tests and diagnosis)."""
    found: list[list[bytes]] = []
    pos = 0
    while pos < len(data):
        parsed = _command_at(data, pos)
        if parsed is None:
            break
        args, pos = parsed
        found.append(args)
    return found


def _last_clean_offset(data: bytes) -> tuple[int, bool]:
    """The offset after the last whole command that is not inside an open MULTI block, and
    whether the file ended inside such a block (redis keeps none of an unfinished block)."""
    pos = clean = 0
    multi_start: int | None = None
    while pos < len(data):
        parsed = _command_at(data, pos)
        if parsed is None:
            break
        args, end = parsed
        name = args[0].upper() if args else b""
        if name == b"MULTI":
            multi_start = pos
        elif name == b"EXEC":
            multi_start = None
        pos = end
        if multi_start is None:
            clean = pos
    return clean, multi_start is not None


def _command_at(data: bytes, pos: int) -> tuple[list[bytes], int] | None:
    """One RESP array of bulk strings at `pos`: (args, end), or None if the data ends first.

    Raises AofFormatError when the bytes are not RESP at all (damage before the end)."""
    header = _line_at(data, pos, b"*")
    if header is None:
        return None
    count, pos = header
    args = []
    for _ in range(count):
        bulk = _line_at(data, pos, b"$")
        if bulk is None:
            return None
        length, pos = bulk
        if pos + length + 2 > len(data):
            return None
        if data[pos + length:pos + length + 2] != b"\r\n":
            raise AofFormatError(f"a bulk string at byte {pos} does not end where its length says")
        args.append(data[pos:pos + length])
        pos += length + 2
    return args, pos


def _line_at(data: bytes, pos: int, kind: bytes) -> tuple[int, int] | None:
    if pos >= len(data):
        return None
    if data[pos:pos + 1] != kind:
        raise AofFormatError(f"expected {kind.decode()!r} at byte {pos}, found {data[pos:pos + 1]!r}")
    end = data.find(b"\r\n", pos)
    if end < 0:  # the data ends inside this header
        rest = data[pos + 1:].rstrip(b"\r")
        if rest and not rest.isdigit():
            raise AofFormatError(f"a malformed header at byte {pos}")
        return None
    digits = data[pos + 1:end]
    if not digits.isdigit():
        raise AofFormatError(f"a malformed header at byte {pos}")
    return int(digits), end + 2
