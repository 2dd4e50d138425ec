"""Checks of the built-in skill base data files (graph_schema/skills/*.yaml).

The files are read directly with yaml and validated with the graph's pydantic models, so these
checks do not depend on the loader; one extra test runs the loader when it is present.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from kskill.agents.recipes import RECIPES
from kskill.graph_schema.model import (
    AddressedBy,
    Bottleneck,
    Condition,
    Evidence,
    FailurePattern,
    Metric,
    Source,
    Technique,
    stable_id,
)

SKILLS = Path(__file__).resolve().parents[2] / "graph_schema" / "skills"
CORPUS = Path(os.environ.get("KSKILL_CORPUS_DIR", "/work/shared/corpus"))

# The names other parts of kskill produce; the skill base must define each with this source and type.
SHARED_METRICS: dict[str, tuple[str, str]] = {
    **{name: ("ncu", "number") for name in (
        "sm_throughput_pct", "dram_throughput_pct", "l2_throughput_pct", "l1_throughput_pct",
        "memory_throughput_pct", "achieved_occupancy_pct", "theoretical_occupancy_pct",
        "registers_per_thread", "shared_mem_per_block_bytes", "warp_stall_long_scoreboard_pct",
        "warp_stall_barrier_pct", "warp_stall_math_pipe_pct", "warp_stall_not_selected_pct",
        "branch_efficiency_pct", "global_load_sectors_per_request", "shared_bank_conflicts",
        "tensor_pipe_utilization_pct", "waves_per_sm", "grid_size", "block_size")},
    "occupancy_limiter": ("ncu", "string"),
    **{name: ("torch_profiler", "number") for name in (
        "kernel_launches_per_forward", "gpu_kernel_time_ms", "cpu_overhead_pct",
        "largest_kernel_share_pct", "distinct_kernels")},
    **{name: ("derived", "number") for name in (
        "runtime_ms", "reference_runtime_ms", "speedup", "arithmetic_intensity",
        "roofline_fraction", "headroom", "memory_stall_share")},
    "memory_bound": ("derived", "bool"),
    "compute_bound": ("derived", "bool"),
    "dtype": ("problem", "string"),
    "atol": ("problem", "number"),
    "rtol": ("problem", "number"),
    "output_numel": ("problem", "number"),
    "input_bytes": ("problem", "number"),
    "batchnorm_training": ("problem", "bool"),
}
RECIPE_KEYS = set(RECIPES)  # the recipe brain's one registry (agents/recipes/registry.py)
NAMED_TECHNIQUES = {
    "shared_memory_tiling", "split_k", "memory_coalescing", "register_blocking", "loop_unrolling",
    "reduce_block_size", "increase_occupancy", "persistent_kernel", "software_pipelining",
    "bank_conflict_padding", "cache_modifiers", "recompute_instead_of_store",
    "warp_shuffle_reduction", "branch_free_predication", "grouped_tile_rasterization",
}
# Node ids are unique across labels, so the compute-bound bottleneck is `compute_limited`: the
# name `compute_bound` belongs to the derived metric the Reviewer reports.
NAMED_BOTTLENECKS = {
    "memory_bandwidth", "memory_latency", "launch_overhead", "compute_limited", "register_pressure",
    "occupancy_limited", "warp_divergence", "uncoalesced_access", "tensor_core_unused",
    "redundant_work", "shared_memory_bank_conflicts", "tail_effect",
}
NUMERIC_OPS = {"<", "<=", ">", ">="}


def _load(name: str) -> Any:
    with open(SKILLS / name, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    return {
        "meta": _load("skillbase.yaml"),
        "sources": _load("sources.yaml"),
        "metrics": _load("metrics.yaml"),
        "bottlenecks": _load("bottlenecks.yaml"),
        "techniques": _load("techniques.yaml"),
        "failures": _load("failures.yaml"),
    }


def _conditions(data: dict[str, Any]) -> list[tuple[str, list[Any]]]:
    """Every condition triple with the node that owns it."""
    found = [(b["id"], c) for b in data["bottlenecks"] for c in b["signature"]]
    for t in data["techniques"]:
        found += [(t["id"], c) for c in t["requires"] + t["forbidden_when"]]
        for v in t.get("variants") or []:
            found += [(v["id"], c) for c in v.get("requires", []) + v.get("forbidden_when", [])]
    return found


def _condition(triple: list[Any]) -> Condition:
    return Condition.of(*triple) if len(triple) == 3 else Condition.of(triple[0], triple[1])


def _evidenced(data: dict[str, Any]) -> list[dict[str, Any]]:
    variants = [v for t in data["techniques"] for v in t.get("variants") or []]
    return data["bottlenecks"] + data["techniques"] + variants + data["failures"]


def test_version_is_semantic(data):
    assert re.fullmatch(r"\d+\.\d+\.\d+", data["meta"]["version"])


def test_every_node_validates(data):
    for row in data["sources"]:
        Source(**row)
    for row in data["metrics"]:
        Metric(**row)
    for row in data["bottlenecks"]:
        Bottleneck(id=row["id"], name=row["name"], description=row["description"])
        assert row["signature"], f"{row['id']} has an empty signature"
        for edge in row["techniques"]:
            AddressedBy(priority=edge["priority"], expected_gain=edge["expected_gain"])
    for row in data["techniques"]:
        Technique(**{k: row[k] for k in ("id", "name", "description", "playbook", "recipe")})
        assert row["playbook"].strip(), f"{row['id']} has no playbook"
    for row in data["failures"]:
        FailurePattern(**{k: row[k] for k in ("id", "name", "description", "failure_class", "patterns", "remedy")})
        assert row["id"].startswith("fp_")
    for owner, triple in _conditions(data):
        assert len(triple) in (2, 3), f"{owner}: condition {triple} is not [metric, op(, value)]"
        _condition(triple)
    for row in _evidenced(data):
        for ev in row["evidence"]:
            Evidence(id=stable_id("ev", row["id"], ev["quote"]), quote=ev["quote"], location=ev["location"])


def test_ids_are_unique(data):
    ids = [row["id"] for kind in ("sources", "metrics", "bottlenecks", "techniques", "failures") for row in data[kind]]
    dupes = [i for i, n in Counter(ids).items() if n > 1]
    assert not dupes, f"duplicate ids: {dupes}"


def test_counts_meet_the_minimums(data):
    assert len(data["bottlenecks"]) >= 12
    assert len(data["techniques"]) >= 30
    assert len(data["failures"]) >= 15


def test_named_ids_are_present(data):
    techniques = {t["id"] for t in data["techniques"]}
    assert RECIPE_KEYS | NAMED_TECHNIQUES <= techniques, sorted((RECIPE_KEYS | NAMED_TECHNIQUES) - techniques)
    bottlenecks = {b["id"] for b in data["bottlenecks"]}
    assert NAMED_BOTTLENECKS <= bottlenecks, sorted(NAMED_BOTTLENECKS - bottlenecks)


def test_every_recipe_key_is_on_its_technique(data):
    keys = {t["recipe"] for t in data["techniques"] if t["recipe"]}
    assert keys == RECIPE_KEYS, f"unexpected or missing recipe keys: {keys ^ RECIPE_KEYS}"
    own = {t["recipe"] for t in data["techniques"] if t["recipe"] == t["id"]}
    assert own == RECIPE_KEYS, "each recipe is named after the technique it implements first"
    # Another technique may reuse a recipe (pointwise_kernel: the fusion recipe on a lone op), but then
    # the two conflict, so no lineage applies one recipe twice.
    for t in data["techniques"]:
        if t["recipe"] and t["recipe"] != t["id"]:
            assert t["recipe"] in t["conflicts_with"], t["id"]


def test_variants_cite_evidence_and_have_distinct_params(data):
    for t in data["techniques"]:
        variants = t.get("variants") or []
        assert len({yaml.safe_dump(v.get("params") or {}, sort_keys=True) for v in variants}) == len(variants), t["id"]
        for v in variants:
            assert v["id"].startswith(t["id"] + ".") and v["evidence"], v["id"]
            for c in v.get("requires", []) + v.get("forbidden_when", []):
                _condition(c)  # a valid condition triple


def test_3xtf32_and_tf32_variants_are_gated_by_tolerance(data):
    forms = {v["id"]: v for t in data["techniques"] for v in t.get("variants") or []}
    for vid, v in forms.items():
        precision = (v.get("params") or {}).get("dot_precision")
        if precision in ("tf32x3", "tf32"):
            floor = 1e-5 if precision == "tf32x3" else 5e-3
            for tol in ("rtol", "atol"):
                assert [tol, ">=", floor] in v["requires"], (vid, tol)


def test_shared_metric_names_have_agreed_source_and_type(data):
    metrics = {m["id"]: m for m in data["metrics"]}
    for name, (source, kind) in SHARED_METRICS.items():
        assert name in metrics, f"vocabulary lacks {name}"
        assert (metrics[name]["source"], metrics[name]["type"]) == (source, kind), name


def test_ncu_names_are_unique_to_one_metric(data):
    raw = [n for m in data["metrics"] for n in m.get("ncu_names", [])]
    assert not [n for n, c in Counter(raw).items() if c > 1]
    assert all(m.get("ncu_names") for m in data["metrics"] if m["source"] == "ncu")
    assert not any(m.get("ncu_names") for m in data["metrics"] if m["source"] != "ncu")


def test_every_condition_uses_a_vocabulary_metric_of_the_right_type(data):
    metrics = {m["id"]: m for m in data["metrics"]}
    for owner, triple in _conditions(data):
        metric, op = triple[0], triple[1]
        assert metric in metrics, f"{owner}: {metric} is not in metrics.yaml"
        kind = metrics[metric]["type"]
        if kind == "bool":
            assert op == "is_true" or (op in ("==", "!=") and isinstance(triple[2], bool)), f"{owner}: {triple}"
        elif kind == "number":
            assert op in NUMERIC_OPS | {"==", "!="}, f"{owner}: {triple}"
            assert isinstance(triple[2], (int, float)) and not isinstance(triple[2], bool), f"{owner}: {triple}"
        else:
            assert op in ("==", "!=", "in"), f"{owner}: {triple}"
            values = triple[2] if op == "in" else [triple[2]]
            assert all(isinstance(v, str) for v in values), f"{owner}: {triple}"


def _satisfiable(conditions: list[list[Any]]) -> bool:
    """Whether numeric bounds and equalities on each metric leave some value possible."""
    by_metric: dict[str, list[list[Any]]] = {}
    for c in conditions:
        by_metric.setdefault(c[0], []).append(c)
    for conds in by_metric.values():
        low, high = float("-inf"), float("inf")
        equal = {c[2] for c in conds if c[1] == "=="}
        if len(equal) > 1:
            return False
        for _, op, value in (c for c in conds if c[1] in NUMERIC_OPS):
            if op in (">", ">="):
                low = max(low, value + (1e-12 if op == ">" else 0))
            else:
                high = min(high, value - (1e-12 if op == "<" else 0))
        if low > high or any(isinstance(v, (int, float)) and not low <= v <= high for v in equal):
            return False
    return True


def test_signatures_and_preconditions_are_satisfiable(data):
    for b in data["bottlenecks"]:
        assert _satisfiable(b["signature"]), f"{b['id']} signature can never hold"
    for t in data["techniques"]:
        assert _satisfiable(t["requires"]), f"{t['id']} requires can never hold"
        for forbidden in t["forbidden_when"]:
            assert forbidden not in t["requires"], f"{t['id']} both requires and forbids {forbidden}"


def test_references_resolve(data):
    sources = {s["id"] for s in data["sources"]}
    techniques = {t["id"] for t in data["techniques"]}
    for b in data["bottlenecks"]:
        targets = [e["technique"] for e in b["techniques"]]
        assert set(targets) <= techniques, f"{b['id']}: {set(targets) - techniques}"
        assert len(targets) == len(set(targets)), f"{b['id']} lists a technique twice"
    for t in data["techniques"]:
        assert set(t["conflicts_with"]) <= techniques and t["id"] not in t["conflicts_with"], t["id"]
    for f in data["failures"]:
        assert set(f["remedied_by"]) <= techniques, f"{f['id']}: {set(f['remedied_by']) - techniques}"
    for row in _evidenced(data):
        assert row["evidence"], f"{row['id']} cites no source"
        for ev in row["evidence"]:
            assert ev["source"] in sources, f"{row['id']}: unknown source {ev['source']}"
            assert ev["quote"].strip() and ev["location"].strip(), f"{row['id']}: empty quote or location"


def test_conflicts_are_symmetric(data):
    conflicts = {t["id"]: set(t["conflicts_with"]) for t in data["techniques"]}
    for tid, others in conflicts.items():
        for other in others:
            assert tid in conflicts[other], f"{tid} conflicts with {other} but not the reverse"


def test_every_technique_is_reachable_from_a_bottleneck(data):
    reachable = {e["technique"] for b in data["bottlenecks"] for e in b["techniques"]}
    unreachable = {t["id"] for t in data["techniques"]} - reachable
    assert not unreachable, f"no bottleneck leads to {sorted(unreachable)}"


def test_tf32_is_gated_by_tolerance(data):
    tf32 = next(t for t in data["techniques"] if t["id"] == "tf32_tensor_cores")
    assert ["rtol", ">=", 0.005] in tf32["requires"] and ["dtype", "==", "float32"] in tf32["requires"]


def test_failure_patterns_compile(data):
    for f in data["failures"]:
        assert f["patterns"], f"{f['id']} has no pattern"
        for pattern in f["patterns"]:
            re.compile(pattern, re.IGNORECASE)


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        ("RuntimeError: CUDA error: an illegal memory access was encountered", "fp_illegal_memory_access"),
        ("triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 262144, Hardware limit: "
         "232448. Reducing block sizes or `num_stages` may help.", "fp_shared_memory_exceeded"),
        ("triton.runtime.errors.OutOfResources: out of resource: threads, Required: 2048, Hardware limit: 1024.",
         "fp_invalid_launch_configuration"),
        ("AssertionError: Input shapes should have M >= 1, N >= 1 and K >= 8", "fp_triton_dot_shape"),
        ("AssertionError: Both operands must be same dtype. Got fp32 and fp16", "fp_triton_dot_shape"),
        ("ValueError: arange's arguments must be of type tl.constexpr", "fp_triton_block_not_pow2"),
        ("ptxas error   : Entry function 'k' uses too much shared data", "fp_shared_memory_exceeded"),
        ("RuntimeError: CUDA error: too many resources requested for launch", "fp_too_many_registers"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "fp_out_of_memory"),
        ("AssertionError: Tensor-likes are not close!\n\nMismatched elements: 12 / 4096 (0.3%)", "fp_output_mismatch"),
        ("ValueError: arange's range must be a power of 2", "fp_triton_block_not_pow2"),
        ("ValueError: numel (2097152) exceeds triton maximum tensor numel (1048576)", "fp_triton_numel_limit"),
        ("RuntimeError: Error building extension 'fused_ext'", "fp_cuda_extension_build"),
        ("subprocess.TimeoutExpired: Command '['python', 'run.py']' timed out after 120 seconds", "fp_timeout"),
        ("RuntimeError: CUDA error: operation not permitted when stream is capturing", "fp_cuda_graph_capture"),
        ("RuntimeError: CUDA error: misaligned address", "fp_misaligned_address"),
        ("RuntimeError: CUDA error: device-side assert triggered", "fp_device_assert"),
        ("RuntimeError: Found no NVIDIA driver on your system.", "fp_no_cuda_device"),
    ],
)
def test_failure_patterns_match_real_messages(data, log, expected):
    matched = {f["id"] for f in data["failures"] if any(re.search(p, log, re.IGNORECASE) for p in f["patterns"])}
    assert expected in matched, f"{expected} not among {matched}"


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _corpus_text(name: str) -> str:
    path = CORPUS / name
    if path.suffix == ".pdf":
        pypdf = pytest.importorskip("pypdf", reason="pypdf reads the PDF corpus document")
        return " ".join(page.extract_text() or "" for page in pypdf.PdfReader(path).pages)
    return path.read_text(encoding="utf-8")


@pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus directory absent; set KSKILL_CORPUS_DIR to check quotes")
def test_corpus_quotes_are_verbatim(data):
    files = {}
    for s in data["sources"]:
        if s["kind"] == "corpus":
            match = re.search(r"corpus file (\S+?)\)?$", s["citation"])
            assert match, f"{s['id']} does not name its corpus file"
            files[s["id"]] = _normalise(_corpus_text(match.group(1)))
    checked = 0
    for row in _evidenced(data):
        for ev in row["evidence"]:
            if ev["source"] in files:
                assert _normalise(ev["quote"]) in files[ev["source"]], f"{row['id']}: quote not in {ev['source']}: {ev['quote']!r}"
                checked += 1
    assert checked >= 50


def test_loader_reads_the_same_files(data):
    skillbase = pytest.importorskip("kskill.graph_schema.skillbase", reason="the skill base loader is not written yet")
    loaded = skillbase.read_builtin()
    text = repr(loaded)
    for kind in ("bottlenecks", "techniques", "failures"):
        for row in data[kind]:
            assert row["id"] in text, f"loader lost {row['id']}"


@pytest.mark.parametrize(("module_file", "text"), [
    ("runtime/errors.py", "Reducing block sizes or `num_stages` may help."),
    ("runtime/errors.py", "out of resource: {self.name}, Required: {self.required}, Hardware limit: {self.limit}"),
    ("runtime/jit.py", "Decorator for JIT-compiling a function using the Triton compiler."),
    ("language/semantic.py", "arange's range must be a power of 2"),
    ("language/semantic.py", "arange's arguments must be of type tl.constexpr"),
    ("language/semantic.py", "Input shapes should have M >= {min_dot_size[0]}, N >= {min_dot_size[1]} and K >= "),
    ("language/semantic.py", "Both operands must be same dtype."),
    ("_utils.py", "exceeds triton maximum tensor numel"),
    ("language/core.py", "How to exercise the Tensor Cores for f32 x f32."),
])
def test_triton_messages_and_quotes_exist_in_triton(module_file, text):
    """The Triton messages the failure samples use, and the quoted docstring, are Triton's own text."""
    triton = pytest.importorskip("triton", reason="triton is needed to read its messages")
    source = (Path(triton.__file__).parent / module_file).read_text(encoding="utf-8")
    assert text in source
