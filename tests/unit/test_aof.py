"""The append-only file reader: manifest, sizes, and where a damaged tail can be cut."""

from __future__ import annotations

from pathlib import Path

import pytest

from kskill.graph_schema import aof


def resp(*args: bytes) -> bytes:
    out = b"*%d\r\n" % len(args)
    for arg in args:
        out += b"$%d\r\n%s\r\n" % (len(arg), arg)
    return out


def make_store(tmp_path: Path, incr: bytes, base: bytes = b"REDIS0012" + b"\x00" * 100) -> Path:
    folder = tmp_path / aof.AOF_DIR
    folder.mkdir(parents=True)
    (folder / "appendonly.aof.3.base.rdb").write_bytes(base)
    (folder / "appendonly.aof.3.incr.aof").write_bytes(incr)
    (folder / aof.MANIFEST).write_text(
        "file appendonly.aof.2.base.rdb seq 2 type h\n"
        "file appendonly.aof.3.base.rdb seq 3 type b\n"
        "file appendonly.aof.3.incr.aof seq 3 type i startoffset 0 endoffset 9\n")
    return tmp_path


SELECT = resp(b"SELECT", b"0")
WRITE = resp(b"GRAPH.QUERY", b"kskill", b"CREATE (:Run {id: 'r1'})")
BLOCK = resp(b"MULTI") + resp(b"GRAPH.EFFECT", b"kskill", b"\x00\r\n\x01binary") + resp(b"EXEC")


def test_manifest_parts_and_sizes(tmp_path: Path):
    data = make_store(tmp_path, SELECT + WRITE)
    kinds = [(p.path.name, p.kind) for p in aof.parts(data)]
    assert kinds == [("appendonly.aof.3.base.rdb", "b"), ("appendonly.aof.3.incr.aof", "i")], \
        "history files awaiting deletion are not part of the store"
    assert aof.incremental_size(data) == len(SELECT + WRITE)
    assert aof.total_size(data) == len(SELECT + WRITE) + 109


def test_a_whole_file_has_no_damage(tmp_path: Path):
    assert aof.find_tail_damage(make_store(tmp_path, SELECT + WRITE + BLOCK)) is None


@pytest.mark.parametrize("cut", [1, 5, 10, len(SELECT) + 7, len(SELECT + WRITE) - 1])
def test_a_cut_inside_a_command_is_found(tmp_path: Path, cut: int):
    data = make_store(tmp_path, (SELECT + WRITE)[:cut])
    damage = aof.find_tail_damage(data)
    assert damage is not None and not damage.in_multi
    assert damage.valid_bytes == (0 if cut < len(SELECT) else len(SELECT))
    assert damage.total_bytes == cut


def test_a_cut_inside_a_multi_block_drops_the_whole_block(tmp_path: Path):
    whole = SELECT + WRITE + BLOCK
    for cut in range(len(SELECT + WRITE) + 1, len(whole)):
        damage = aof.find_tail_damage(make_store(tmp_path / str(cut), whole[:cut]))
        assert damage is not None and damage.in_multi == (cut >= len(SELECT + WRITE + resp(b"MULTI"))), cut
        assert damage.valid_bytes == len(SELECT + WRITE), "nothing of an unfinished block is kept"


def test_binary_payloads_are_skipped_by_length(tmp_path: Path):
    payload = b"*3\r\n$1\r\nx" * 50  # looks like RESP inside a bulk string
    data = make_store(tmp_path, resp(b"GRAPH.EFFECT", b"k", payload) + WRITE)
    assert aof.find_tail_damage(data) is None
    assert [c[0] for c in aof.commands(aof.parts(data)[1].path.read_bytes())] == [b"GRAPH.EFFECT", b"GRAPH.QUERY"]


def test_damage_before_the_end_is_not_a_tail(tmp_path: Path):
    broken = SELECT + b"garbage that is not RESP\r\n" + WRITE
    with pytest.raises(aof.AofFormatError):
        aof.find_tail_damage(make_store(tmp_path, broken))


def test_cut_tail_keeps_a_copy_and_cuts_to_the_last_whole_write(tmp_path: Path):
    whole = SELECT + WRITE + BLOCK
    damaged = whole[:-3]
    data = make_store(tmp_path, damaged)
    damage = aof.find_tail_damage(data)
    backup = aof.cut_tail(data, damage)
    assert backup.read_bytes() == damaged, "the backup is the file as it was found"
    assert backup.parent == data / aof.BACKUP_DIR
    assert aof.parts(data)[1].path.read_bytes() == SELECT + WRITE
    assert aof.find_tail_damage(data) is None


def test_holds_nothing(tmp_path: Path):
    assert aof.holds_nothing(tmp_path), "no appendonlydir"
    data = make_store(tmp_path, b"")
    assert aof.holds_nothing(data), "an empty base and an empty log"
    (data / aof.AOF_DIR / "appendonly.aof.3.incr.aof").write_bytes(WRITE)
    assert not aof.holds_nothing(data)
    (data / aof.AOF_DIR / "appendonly.aof.3.base.rdb").unlink()
    assert aof.holds_nothing(data), "a file the manifest names is gone"


def test_schema_commands_are_noticed(tmp_path: Path):
    assert not aof.has_schema_commands(make_store(tmp_path / "a", SELECT + WRITE))
    ddl = resp(b"GRAPH.CONSTRAINT", b"CREATE", b"kskill", b"UNIQUE", b"NODE", b"Run", b"PROPERTIES", b"1", b"id")
    assert aof.has_schema_commands(make_store(tmp_path / "b", SELECT + ddl))
