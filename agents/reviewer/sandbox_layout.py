"""What a sandboxed worker sees: its file system (as a list of mounts) and its environment.

The root is built from nothing: an empty tmpfs with read-only binds of the system (/usr, /etc, /opt
and the /bin, /lib links), the Python environment (prefixes, every sys.path directory, kskill's own
package directories), LD_LIBRARY_PATH and CUDA_HOME; a fresh /proc of the sandbox's PID namespace,
a minimal /dev plus the NVIDIA device nodes, /sys read-only; and one writable directory, the
review's workdir, which also serves as /tmp and /dev/shm. Everything else (the user's home,
KSKILL_HOME with the graph's socket, run directories, other reviews) is simply not there. A
private path that lies inside a bound directory (a home inside a virtualenv, say) is covered
with an empty read-only mount. Nobody inside holds a capability, so no mount can be undone.

The environment is an allow-list of what Python, torch, Triton and CUDA read, minus anything
whose name looks like a secret, plus per-workdir HOME, temp and cache directories.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION")
ENV_NAMES = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME", "LD_LIBRARY_PATH", "CC", "CXX",
    "PYTHONPATH", "PYTHONHOME", "PYTHONWARNINGS", "PYTHONFAULTHANDLER", "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "KSKILL_EXAMPLE_SCALE",  # the bundled and suite problems size their inputs by it
})
EXTRA_NAMES = "KSKILL_SANDBOX_ENV"  # comma-separated names a user's own problem files read
ENV_PREFIXES = ("LC_", "TRITON_", "TORCH_", "TORCHINDUCTOR_", "TORCHDYNAMO_", "PYTORCH_", "CUDA_", "CUBLAS_",
                "CUBLASLT_", "CUDNN_", "NVIDIA_TF32", "KMP_", "OMP_", "MKL_", "GOMP_")
SYSTEM_ROOTS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt")
# Readable by root inside a user namespace when kskill runs as root: kept out all the same.
SYSTEM_SECRETS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssh", "/etc/sudoers",
                  "/etc/sudoers.d", "/etc/ssl/private", "/etc/security/opasswd")
GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/nvidia-caps-imex-channels")
SANDBOX_ROOT = ".root"  # under the workdir: where unshare's init builds the new root


def _secret_looking(name: str) -> bool:
    return any(marker in name.upper() for marker in SECRET_MARKERS)


def allowed_environment(base: Mapping[str, str], extra: Mapping[str, str]) -> tuple[dict[str, str], list[str], list[str]]:
    """(environment, names passed from base, names dropped from base): the allow-list (plus the names
    that KSKILL_SANDBOX_ENV lists), then `extra`. The problem runs in the worker too and must see
    what it reads, or it builds other inputs there than in the kskill process."""
    chosen = {n.strip() for n in base.get(EXTRA_NAMES, "").split(",") if n.strip()}
    passed = sorted(k for k in base if (k in ENV_NAMES or k in chosen or k.startswith(ENV_PREFIXES))
                    and not _secret_looking(k))
    env = {k: base[k] for k in passed}
    env.update(extra)
    dropped = sorted(k for k in base if k not in env)
    return env, passed, dropped


TRITON_CACHE = "triton_cache"  # where, under a workdir, the sandbox's Triton compiles to


def workspace_environment(workdir: Path) -> dict[str, str]:
    """Per-candidate home, temp, build and cache directories, created under the candidate's workdir."""
    dirs = {"HOME": "home", "TMPDIR": "tmp", "TORCH_EXTENSIONS_DIR": "build", "TRITON_CACHE_DIR": TRITON_CACHE,
            "TRITON_HOME": "home", "TORCHINDUCTOR_CACHE_DIR": "inductor_cache", "CUDA_CACHE_PATH": "cuda_cache",
            "XDG_CACHE_HOME": "cache"}
    env = {}
    for var, name in dirs.items():
        path = workdir / name
        path.mkdir(parents=True, exist_ok=True)
        env[var] = str(path)
    (workdir / "shm").mkdir(exist_ok=True)
    env.update(TEMP=env["TMPDIR"], TMP=env["TMPDIR"], PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0",
               PYTHONUNBUFFERED="1")
    return env


@dataclass
class Layout:
    """The mounts of one sandbox, in order, and the same in words for the isolation record."""

    ops: list[list[str]] = field(default_factory=list)
    read_only: list[str] = field(default_factory=list)
    writable: list[str] = field(default_factory=list)
    masked: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def python_paths(env: Mapping[str, str], argv0: str | None = None) -> list[str]:
    """Directories the worker's Python needs: the prefixes, the sys.path entries that hold installed
    packages (a script's own directory is not one), PYTHONPATH, kskill's package directories (an
    editable install maps them outside site-packages), and the directory of a program that is not Python."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    explicit = {p for p in env.get("PYTHONPATH", "").split(":") if p}
    paths = set(prefixes)
    paths.update(p for p in sys.path if p and os.path.exists(p) and (
        p in explicit or os.path.basename(p) in ("site-packages", "dist-packages")
        or any(_under(p, prefix) for prefix in prefixes)))
    paths.update(location for name, module in list(sys.modules.items())
                 if name == "kskill" or name.startswith("kskill.") for location in getattr(module, "__path__", []))
    if argv0 and os.path.isabs(argv0):
        paths.add(os.path.dirname(os.path.realpath(argv0)))
    return sorted(os.path.abspath(p) for p in paths)


def library_paths(env: Mapping[str, str]) -> list[str]:
    dirs = [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs += [env[k] for k in ("CUDA_HOME", "CUDA_PATH") if env.get(k)]
    return [os.path.abspath(d) for d in [*dirs, *driver_library_dirs()] if os.path.isdir(d)]


@functools.lru_cache(maxsize=1)
def driver_library_dirs() -> tuple[str, ...]:
    """Where the loader finds the NVIDIA driver's libraries (libcuda, libnvidia-*), on a GPU machine:
    they need not lie under /usr (driver containers install them elsewhere and register them)."""
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    if not glob.glob("/dev/nvidia*") or not os.path.exists(ldconfig):
        return ()
    try:
        listing = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return driver_dirs_in(listing)


def driver_dirs_in(ldconfig_listing: str) -> tuple[str, ...]:
    """The directories of the NVIDIA driver's libraries in `ldconfig -p` output."""
    found = {os.path.dirname(line.rsplit("=>", 1)[1].strip()) for line in ldconfig_listing.splitlines()
             if "=>" in line and re.search(r"\blib(cuda|nvidia-[\w-]+|nvcuvid)\.so", line)}
    return tuple(sorted(found))


def build_layout(workdir: Path, env: Mapping[str, str], hidden: Iterable[str | Path] = (),
                 argv0: str | None = None) -> Layout:
    """The mounts for a worker in `workdir`; `hidden` are private paths that must not show even
    where they lie inside a bound directory (the user's home is always one)."""
    layout = Layout()
    bound: list[tuple[str, str]] = []  # (path inside, real path outside)
    links: list[str] = []
    for name in SYSTEM_ROOTS:
        path = f"/{name}"
        if os.path.islink(path):
            layout.ops.append(["symlink", os.readlink(path), path])
            links.append(path)
        elif os.path.isdir(path):
            bound.append((path, os.path.realpath(path)))
    for path in sorted(set(python_paths(env, argv0) + library_paths(env)), key=len):
        shown = any(_under(path, inside) for inside, _ in bound) or any(_under(path, link) for link in links)
        if not shown:
            bound.append((path, os.path.realpath(path)))
    private = {os.path.realpath(p) for p in [Path.home(), *hidden]}
    kept = [(inside, real) for inside, real in bound if real not in private]
    # /tmp first: a Python environment may itself live under /tmp and is then bound on top of it.
    layout.ops.append(["rw", f"{workdir}/tmp", "/tmp"])
    for inside, real in kept:
        layout.ops.append(["ro", real, inside])
        layout.read_only.append(inside)
    for inside, real in kept:  # a private path inside a bound directory gets an empty mount over it
        for secret in sorted(private | set(SYSTEM_SECRETS)):
            if secret != real and _under(secret, real) and os.path.lexists(secret):
                layout.ops.append(["mask", inside + secret[len(real):]])
                layout.masked.append(inside + secret[len(real):])
    _add_runtime(layout, workdir)
    return layout


def _add_runtime(layout: Layout, workdir: Path) -> None:
    """/dev, /proc, /sys, the GPU's device nodes, and the workdir (also /tmp and /dev/shm)."""
    work = str(workdir)
    layout.ops += [["devfs", "/dev"], ["proc", "/proc"], ["ro", "/sys", "/sys"]]
    layout.read_only.append("/sys")
    for pattern in GPU_DEVICES:
        for device in sorted(glob.glob(pattern)):
            layout.ops.append(["dev", device, device])
            layout.devices.append(device)
    layout.ops += [["rw", f"{work}/shm", "/dev/shm"], ["rw", work, work]]
    layout.writable += [work, "/tmp", "/dev/shm"]


def bwrap_arguments(layout: Layout) -> list[str]:
    """The same mounts as bwrap options, with the root made read-only at the end."""
    flag = {"ro": "--ro-bind", "rw": "--bind", "dev": "--dev-bind"}
    args: list[str] = []
    for kind, *rest in layout.ops:
        if kind in flag:
            args += [flag[kind], *rest]
        elif kind == "mask":
            args += (["--tmpfs", rest[0], "--remount-ro", rest[0]] if os.path.isdir(rest[0])
                     else ["--ro-bind", "/dev/null", rest[0]])
        elif kind == "devfs":
            args += ["--dev", rest[0]]
        elif kind == "proc":
            args += ["--proc", rest[0]]
        elif kind == "symlink":
            args += ["--symlink", *rest]
    return [*args, "--remount-ro", "/"]


def describe(layout: Layout | None) -> dict[str, list[str]]:
    if layout is None:
        return {"read_only": [], "writable": [], "hidden": [], "devices": []}
    return {"read_only": layout.read_only, "writable": layout.writable, "hidden": layout.masked,
            "devices": layout.devices}
