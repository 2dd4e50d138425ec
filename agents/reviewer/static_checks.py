"""Anti-cheat checks on a candidate's source, before anything runs.

Each rule names a way a candidate can look fast or correct without being so: patching
timers or synchronisation, moving work to threads, processes or side streams, swallowing
failures to fall back on PyTorch, reaching the reference's outputs through introspection,
compiling with torch.compile, or hiding code from these checks (exec, eval). Findings with
severity "reject" stop the review; "warn" findings are reported and the candidate runs.
"""

from __future__ import annotations

import ast
import re
from kskill.agents.reviewer.models import Flag

# Modules whose import alone means work or data escapes the measured forward.
REJECTED_IMPORTS: dict[str, tuple[str, str]] = {
    "threading": ("threads_or_processes", "threads run work outside the timed region"),
    "_thread": ("threads_or_processes", "threads run work outside the timed region"),
    "multiprocessing": ("threads_or_processes", "processes run work outside the timed region"),
    "concurrent": ("threads_or_processes", "executors run work outside the timed region"),
    "subprocess": ("threads_or_processes", "subprocesses run work outside the timed region"),
    "asyncio": ("threads_or_processes", "event loops run work outside the timed region"),
    "gc": ("introspection", "gc can find the reference's tensors"),
    "inspect": ("introspection", "inspect can read the harness's frames and the reference's outputs"),
    "ctypes": ("introspection", "ctypes can patch the runtime or read arbitrary memory"),
    "importlib": ("introspection", "importlib can load the harness or the problem module"),
    "builtins": ("monkeypatch", "builtins can be patched to fool the harness"),
    "socket": ("network", "candidates need no network"),
    "urllib": ("network", "candidates need no network"),
    "http": ("network", "candidates need no network"),
    "requests": ("network", "candidates need no network"),
    "pickle": ("file_io", "candidates load no precomputed results"),
    "signal": ("process_control", "signal handlers can interrupt the harness"),
    "atexit": ("process_control", "exit hooks can forge the harness's result"),
}

# Dotted calls or attribute reads that are cheating wherever they appear.
REJECTED_ATTRIBUTES: dict[str, tuple[str, str]] = {
    "torch.compile": ("torch_compile", "torch.compile inside the candidate measures the compiler, not the kernel"),
    "torch._dynamo": ("torch_compile", "torch._dynamo inside the candidate measures the compiler, not the kernel"),
    "torch._inductor": ("torch_compile", "torch._inductor inside the candidate measures the compiler"),
    "torch.cuda.Stream": ("stream", "work on a new stream escapes timing on the current stream"),
    "torch.cuda.stream": ("stream", "work on a new stream escapes timing on the current stream"),
    "torch.cuda.set_stream": ("stream", "changing the current stream escapes timing"),
    "torch.cuda.ExternalStream": ("stream", "work on another stream escapes timing"),
    "torch.Stream": ("stream", "work on a new stream escapes timing on the current stream"),
    "torch.cuda.StreamContext": ("stream", "work on another stream escapes timing"),
    "sys._getframe": ("introspection", "frame access can read the harness and the reference's outputs"),
    "sys.modules": ("introspection", "sys.modules reaches the harness and the problem module"),
    "sys.exit": ("process_control", "exiting early can forge the harness's result"),
    "os._exit": ("process_control", "exiting early can forge the harness's result"),
    "os.fork": ("threads_or_processes", "forked processes run work outside the timed region"),
    "os.system": ("threads_or_processes", "shell commands run outside the timed region"),
    "os.popen": ("threads_or_processes", "shell commands run outside the timed region"),
    "os.kill": ("process_control", "signals can interrupt the harness"),
    "torch.load": ("file_io", "candidates load no precomputed results"),
    "torch.save": ("file_io", "candidates store no results between runs"),
}
REJECTED_ATTRIBUTE_PREFIXES = {"os.spawn": "threads_or_processes", "os.exec": "threads_or_processes"}

REJECTED_BUILTINS: dict[str, tuple[str, str]] = {
    "exec": ("dynamic_code", "exec hides code from these checks"),
    "eval": ("dynamic_code", "eval hides code from these checks"),
    "compile": ("dynamic_code", "compile() hides code from these checks"),
    "__import__": ("dynamic_code", "__import__ hides imports from these checks"),
    "globals": ("introspection", "globals() reaches objects outside the candidate"),
    "vars": ("introspection", "vars() reaches objects outside the candidate"),
    "open": ("file_io", "candidates read or write no files"),
    "setattr": ("monkeypatch", "setattr on modules or classes patches the runtime"),
    "delattr": ("monkeypatch", "delattr on modules or classes patches the runtime"),
}
REJECTED_NAMES = {
    "__main__": ("introspection", "the harness's main module holds the reference"),
    "f_back": ("introspection", "frame access can read the harness and the reference's outputs"),
    "f_locals": ("introspection", "frame access can read the harness and the reference's outputs"),
    "f_globals": ("introspection", "frame access can read the harness and the reference's outputs"),
    "__builtins__": ("monkeypatch", "builtins can be patched to fool the harness"),
    "__subclasses__": ("introspection", "class walking reaches the harness's objects"),
}
# CUDA C++ inside strings (load_inline sources): streams the harness does not time.
CUDA_STREAM_PATTERN = re.compile(r"cudaStreamCreate|getStreamFromPool|cudaStreamNonBlocking|cudaDeviceSynchronize\s*=")
BROAD_EXCEPTIONS = {"Exception", "BaseException", "RuntimeError"}


def dotted_name(node: ast.AST) -> str | None:
    """'torch.cuda.Event' for the expression torch.cuda.Event; None for anything not a plain chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Checker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.flags: list[Flag] = []
        self.aliases: dict[str, str] = {}  # local name -> module path it stands for

    def flag(self, code: str, message: str, node: ast.AST, severity: str = "reject") -> None:
        self.flags.append(Flag(code=code, severity=severity, message=message, origin="static",
                               line=getattr(node, "lineno", None)))

    def resolve(self, node: ast.AST) -> str | None:
        name = dotted_name(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        base = self.aliases.get(head, head)
        return f"{base}.{rest}" if rest else base

    # imports ------------------------------------------------------------------------
    def _check_module(self, module: str, node: ast.AST) -> None:
        root = module.split(".")[0]
        if root in REJECTED_IMPORTS:
            code, why = REJECTED_IMPORTS[root]
            self.flag(code, f"imports {module}: {why}", node)
        self._check_dotted(module, node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(alias.name, node)
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                root = alias.name.split(".")[0]
                self.aliases[root] = root
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._check_module(module, node)
        for alias in node.names:
            full = f"{module}.{alias.name}" if module else alias.name
            self.aliases[alias.asname or alias.name] = full
            self._check_dotted(full, node)
        self.generic_visit(node)

    # names and attributes -----------------------------------------------------------
    def _check_dotted(self, name: str, node: ast.AST) -> None:
        for banned, (code, why) in REJECTED_ATTRIBUTES.items():
            if name == banned or name.startswith(banned + "."):
                self.flag(code, f"uses {banned}: {why}", node)
                return
        for prefix, code in REJECTED_ATTRIBUTE_PREFIXES.items():
            if name.startswith(prefix):
                self.flag(code, f"uses {name}: runs work outside the timed region", node)
                return

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in REJECTED_NAMES:
            code, why = REJECTED_NAMES[node.attr]
            self.flag(code, f"uses .{node.attr}: {why}", node)
        name = self.resolve(node)
        if name is not None:
            self._check_dotted(name, node)
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self._check_patch(node)
        # Visit the chain's root only; inner prefixes would repeat the same finding.
        root = node.value
        while isinstance(root, ast.Attribute):
            root = root.value
        self.visit(root)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in REJECTED_NAMES:
            code, why = REJECTED_NAMES[node.id]
            self.flag(code, f"uses {node.id}: {why}", node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            if node.value == "__main__":
                self.flag("introspection", "names __main__: the harness's main module holds the reference", node)
            match = CUDA_STREAM_PATTERN.search(node.value)
            if match:
                self.flag("stream", f"CUDA source uses {match.group(0)}: work on another stream escapes timing", node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in REJECTED_BUILTINS:
            code, why = REJECTED_BUILTINS[node.func.id]
            self.flag(code, f"calls {node.func.id}(): {why}", node)
        self.generic_visit(node)

    # patches -------------------------------------------------------------------------
    def _check_patch(self, target: ast.Attribute) -> None:
        """Assigning to an attribute of an imported module or its classes patches the runtime."""
        name = self.resolve(target)
        root = (dotted_name(target) or "").split(".")[0]
        if name is None or root not in self.aliases:
            return  # self.x = ..., obj.attr = ...: ordinary state
        if name.startswith("torch.backends.") or name.startswith("torch.set_float32_matmul_precision"):
            self.flag("global_setting", f"sets {name}: a process-wide setting; the reference still runs "
                      "with the problem's own settings", target, severity="warn")
            return
        self.flag("monkeypatch", f"assigns to {name}: patching the runtime (timers, synchronisation, "
                  "events, comparisons) can fake speed or correctness", target)

    # exception handling ----------------------------------------------------------------
    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        reraises = any(isinstance(n, ast.Raise) for n in ast.walk(ast.Module(body=node.body, type_ignores=[])))
        if not reraises:
            caught = self._caught_names(node.type)
            if node.type is None or caught & BROAD_EXCEPTIONS:
                self.flag("swallowed_exception", f"catches {', '.join(sorted(caught)) or 'everything'} without "
                          "re-raising: a failing kernel must fail the review, not fall back silently", node)
            else:
                self.flag("exception_handler", f"catches {', '.join(sorted(caught))} without re-raising",
                          node, severity="warn")
        self.generic_visit(node)

    @staticmethod
    def _caught_names(node: ast.AST | None) -> set[str]:
        if node is None:
            return set()
        items = node.elts if isinstance(node, ast.Tuple) else [node]
        return {(dotted_name(i) or "?").split(".")[-1] for i in items}


def is_jit(decorator: ast.expr) -> bool:
    """@triton.jit, @jit, @triton.jit(...): the decorators that make a function a Triton kernel."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (dotted_name(target) or "").split(".")[-1] == "jit"


def cuda_sources(tree: ast.Module) -> str:
    """Every string constant that looks like CUDA C++ (the sources given to load_inline)."""
    texts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return "\n".join(t for t in texts if "__global__" in t or "#include" in t or "--use_fast_math" in t)


CUDA_KERNEL_NAME = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:\w+\s+)*?void\s+"
                              r"(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(")


def claimed_kernels(source: str) -> dict[str, list[str]]:
    """The Triton and CUDA kernels a candidate defines: the review checks that they really run."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {"triton": [], "cuda": []}
    triton = sorted({f.name for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and any(is_jit(d) for d in f.decorator_list)})
    return {"triton": triton, "cuda": sorted(set(CUDA_KERNEL_NAME.findall(cuda_sources(tree))))}


def check_source(source: str) -> list[Flag]:
    """All findings for a candidate's source, in source order; [] when it parses and looks honest."""
    tree = ast.parse(source, filename="candidate.py")
    checker = _Checker()
    checker.visit(tree)
    unique: dict[tuple[str, int | None], Flag] = {}
    for flag in checker.flags:
        unique.setdefault((flag.code, flag.line), flag)
    return sorted(unique.values(), key=lambda f: (f.line or 0, f.code))

