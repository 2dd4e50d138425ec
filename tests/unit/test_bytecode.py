"""The warning about packages without compiled bytecode, on a package made for the test."""

import importlib
import py_compile
import sys

from kskill.bytecode import missing_bytecode


def test_a_package_without_bytecode_is_named_with_the_command_that_fixes_it(tmp_path, monkeypatch):
    package = tmp_path / "nobytes_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    importlib.invalidate_caches()

    warning = missing_bytecode("nobytes_pkg")
    assert warning is not None and "nobytes_pkg has no compiled bytecode" in warning
    assert "PYTHONDONTWRITEBYTECODE is set" in warning
    assert f"-m compileall -q -j 0 {tmp_path}" in warning

    py_compile.compile(str(package / "__init__.py"))  # what compileall writes
    assert missing_bytecode("nobytes_pkg") is None


def test_packages_that_do_not_exist_or_are_not_python_files_give_no_warning():
    assert missing_bytecode("no_such_package_kskill") is None
    assert missing_bytecode("sys") is None  # built in: no source file
