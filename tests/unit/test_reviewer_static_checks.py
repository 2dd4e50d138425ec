"""Each static anti-cheat rule fires on the pattern it names and stays quiet on honest code."""

from pathlib import Path

import pytest

from kskill.agents.reviewer.static_checks import check_source

FIXTURES = Path(__file__).parents[1] / "fixtures" / "reviewer" / "candidates"


def codes(source: str, severity: str = "reject") -> set[str]:
    return {f.code for f in check_source(source) if f.severity == severity}


@pytest.mark.parametrize("path", sorted((FIXTURES / "honest").glob("*.py")), ids=lambda p: p.stem)
def test_honest_candidates_raise_no_rejection(path):
    assert codes(path.read_text()) == set()


@pytest.mark.parametrize("source, code", [
    ("import time\ntime.perf_counter = lambda: 0.0\n", "monkeypatch"),
    ("import torch\ntorch.cuda.Event.elapsed_time = lambda a, b: 1e-3\n", "monkeypatch"),
    ("from torch import cuda\ncuda.synchronize = lambda: None\n", "monkeypatch"),
    ("import torch as T\nT.allclose = lambda *a, **k: True\n", "monkeypatch"),
    ("import torch\nsetattr(torch, 'equal', lambda a, b: True)\n", "monkeypatch"),
    ("import threading\n", "threads_or_processes"),
    ("from concurrent.futures import ThreadPoolExecutor\n", "threads_or_processes"),
    ("import multiprocessing as mp\n", "threads_or_processes"),
    ("import os\nos.system('true')\n", "threads_or_processes"),
    ("import torch\ns = torch.cuda.Stream()\n", "stream"),
    ("import torch\nwith torch.cuda.stream(s):\n    pass\n", "stream"),
    ("from torch.cuda import Stream\n", "stream"),
    ("SRC = 'cudaStream_t s; cudaStreamCreate(&s);'\n", "stream"),
    ("try:\n    y = f()\nexcept Exception:\n    y = g()\n", "swallowed_exception"),
    ("try:\n    y = f()\nexcept:\n    pass\n", "swallowed_exception"),
    ("try:\n    y = f()\nexcept (ValueError, RuntimeError):\n    y = g()\n", "swallowed_exception"),
    ("import torch\nf = torch.compile(g)\n", "torch_compile"),
    ("import torch._dynamo\n", "torch_compile"),
    ("import sys\nf = sys._getframe(1)\n", "introspection"),
    ("x = frame.f_back\n", "introspection"),
    ("import gc\n", "introspection"),
    ("import inspect\n", "introspection"),
    ("import sys\nm = sys.modules['__main__']\n", "introspection"),
    ("exec('x = 1')\n", "dynamic_code"),
    ("m = __import__('threading')\n", "dynamic_code"),
    ("data = open('problem.py').read()\n", "file_io"),
    ("import os\nos._exit(0)\n", "process_control"),
    ("import socket\n", "network"),
])
def test_rule_fires(source, code):
    assert code in codes(source)


@pytest.mark.parametrize("source", [
    "try:\n    import triton\nexcept ImportError:\n    triton = None\n",
    "try:\n    y = f()\nexcept Exception:\n    raise\n",
    "self_cache = {}\nclass A:\n    def f(self):\n        self.cache = 1\n",
    "import torch\ntorch.cuda.synchronize()\n",
    "import torch\ng = torch.cuda.CUDAGraph()\n",
])
def test_honest_patterns_are_not_rejected(source):
    assert codes(source) == set()


def test_narrow_handler_and_backend_switch_are_warnings():
    warnings = codes("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n"
                     "try:\n    f()\nexcept ValueError:\n    pass\n", severity="warn")
    assert warnings == {"global_setting", "exception_handler"}


def test_flags_carry_line_numbers():
    flags = check_source("import torch\n\n\nimport threading\n")
    assert [(f.code, f.line) for f in flags] == [("threads_or_processes", 4)]
