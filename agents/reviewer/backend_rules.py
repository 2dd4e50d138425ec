"""KernelBench's published static rules for a Triton backend, applied to a candidate's source.

KernelBench (ScalingIntelligence/KernelBench, src/kernelbench/kernel_static_checker.py) rejects
a generated kernel before running it when its text shows a known way to pass without writing
a kernel, and, for the Triton backend, when it contains no Triton kernel at all. kskill's own
anti-cheat checks (static_checks.py) are stricter in some ways and looser in others; these rules
answer one question only: would KernelBench's checker accept this module as a Triton solution?

Errors (the module is not accepted):
- `bypass`: a `try`/`except` (a fallback to PyTorch), or the word `pass` (inheritance bypass);
- `timing_patch`: torch.cuda.Event.record / .elapsed_time, torch.cuda.synchronize,
  torch.cuda.Event, time.perf_counter or time.time reassigned;
- `threads`: threading, multiprocessing or concurrent.futures executors;
- `lazy_tensor`: torch.Tensor subclasses, `_make_subclass`, `torch.Tensor.__new__`;
- `no_triton_kernel`: no `@triton.jit` / `@triton.autotune`, or no `tl.` operation.
Warnings (reported, still accepted): `torch_nn_layer` (a torch.nn compute layer),
`torch_op` (a high-level torch or torch.nn.functional computation), `streams`.

The rules read text, as KernelBench's do: comments are cut at the first `#` or `//` of each line
(even inside a string, or at a floor division), and everything else counts, docstrings included,
so a docstring saying "one pass" fails `bypass` here exactly as it does there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# (rule, pattern, message); one table per severity, checked in order.
ERROR_RULES: tuple[tuple[str, str, str], ...] = (
    ("bypass", r"\btry\s*:|\bexcept\s*:|\bexcept\s+\w+", "try/except block (a possible fallback to PyTorch)"),
    ("bypass", r"\bpass\b", "the word 'pass' (read as an inheritance bypass)"),
    ("timing_patch", r"torch\.cuda\.Event\.(record|elapsed_time)\s*=|torch\.cuda\.synchronize\s*="
                     r"|torch\.cuda\.Event\s*=|time\.perf_counter\s*=|time\.time\s*=",
     "a timing function is reassigned"),
    ("threads", r"import\s+threading|from\s+threading\s+import|threading\.Thread\s*\("
                r"|import\s+multiprocessing|multiprocessing\.(Process|Pool|Manager|Queue|Pipe)"
                r"|concurrent\.futures|ThreadPoolExecutor|ProcessPoolExecutor",
     "threads or processes"),
    ("lazy_tensor", r"_make_subclass|class\s+\w+.*\((torch\.)?Tensor\)|torch\.Tensor\.__new__",
     "a tensor subclass or direct tensor construction (a possible lazy tensor)"),
)

# torch.nn containers and helpers a module needs for its structure; any other torch.nn.X is a layer.
NN_CONTAINERS = "Module|parameter|Parameter|ParameterList|ParameterDict|ModuleList|ModuleDict|init"
TORCH_OPS = """mm bmm matmul einsum conv1d conv2d conv3d conv conv_transpose1d conv_transpose2d conv_transpose3d
    avg_pool1d avg_pool2d avg_pool3d max_pool1d max_pool2d max_pool3d adaptive_avg_pool1d adaptive_avg_pool2d
    adaptive_avg_pool3d adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d relu hardtanh elu selu
    leaky_relu gelu softsign softplus softmax log_softmax tanh sigmoid hardsigmoid silu mish batch_norm
    group_norm layer_norm instance_norm rms_norm normalize linear cross_entropy kl_div mse_loss huber_loss
    triplet_margin_loss cosine_similarity logsumexp clamp dropout""".split()
WARNING_RULES: tuple[tuple[str, str, str], ...] = (
    ("torch_nn_layer", rf"torch\.nn\.(?!({NN_CONTAINERS})\b)\w+", "a torch.nn compute layer"),
    ("torch_op", r"\btorch\.(" + "|".join(TORCH_OPS) + r")(?=\s*\(|\s|$)", "a high-level torch computation"),
    ("torch_op", r"torch\.nn\.functional\.\w+|\bnn\.functional\.\w+"
                 r"|\bF\.(conv|linear|relu|gelu|softmax|batch_norm|layer_norm|dropout|max_pool|avg_pool)",
     "a torch.nn.functional computation"),
    ("streams", r"torch\.cuda\.Stream\s*\(|cuda\.Stream\s*\(|with\s+torch\.cuda\.stream"
                r"|\.wait_stream\s*\(|\.record_stream\s*\(", "CUDA streams"),
)
TRITON_DECORATOR = re.compile(r"@triton\.(jit|autotune)")
TRITON_OP = re.compile(r"\btl\.\w+")


@dataclass
class Finding:
    rule: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.rule} (line {self.line}): {self.message}"


@dataclass
class BackendVerdict:
    """Whether KernelBench's checker accepts the source as a Triton solution, and why not."""

    errors: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.errors


def strip_comments(source: str) -> str:
    """Each line cut at its first '#' or '//', as KernelBench's checker reads code."""
    return "\n".join(re.split(r"#|//", line, maxsplit=1)[0] for line in source.split("\n"))


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _first_match(text: str, rules: tuple[tuple[str, str, str], ...]) -> list[Finding]:
    """The first occurrence of each rule's pattern (one finding per rule and pattern)."""
    found = []
    for rule, pattern, message in rules:
        match = re.search(pattern, text)
        if match:
            found.append(Finding(rule, _line_of(text, match.start()), f"{message}: {match.group(0).strip()!r}"))
    return found


def check_triton_backend(source: str) -> BackendVerdict:
    """KernelBench's static verdict on `source` for the Triton backend."""
    text = strip_comments(source)
    verdict = BackendVerdict(errors=_first_match(text, ERROR_RULES), warnings=_first_match(text, WARNING_RULES))
    if not TRITON_DECORATOR.search(text):
        verdict.errors.append(Finding("no_triton_kernel", 1, "no @triton.jit or @triton.autotune kernel"))
    elif not TRITON_OP.search(text):
        verdict.errors.append(Finding("no_triton_kernel", 1, "no tl.* operation in the Triton code"))
    return verdict
