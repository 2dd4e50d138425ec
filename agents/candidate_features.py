"""Static features of a candidate's source (ModelNew), in the Metric vocabulary.

Nothing a candidate wrote is executed: Python and Triton are read with `ast`, and the CUDA
strings handed to load_inline with a token pass. Every feature name is defined in
graph_schema/skills/metrics.yaml; what cannot be determined is listed as unavailable with why.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from kskill.agents.features import Features, Scalar, canonical, op_family
from kskill.agents.reviewer.static_checks import cuda_sources, dotted_name, is_jit

_TL_TRANSCENDENTAL = frozenset("exp exp2 log log2 sigmoid sqrt sqrt_rn rsqrt sin cos erf tanh pow fast_expf "
                               "fast_logf softplus".split())
_CUDA_TRANSCENDENTAL = re.compile(r"\b(?:__)?(?:expf?|exp2f|expm1f|logf?|log2f|log1pf|tanhf?|sqrtf|rsqrtf|"
                                  r"sinf|cosf|erff|powf|tanf|__expf|__logf|__sinf|__cosf|__powf|hexp|hlog)\s*\(")
_CUDA_FAST_MATH = re.compile(r"__expf|__logf|__fdividef|__sinf|__cosf|__powf|__tanf|--use_fast_math|-use_fast_math")
_CUDA_VECTOR = (("float4", 4), ("int4", 4), ("uint4", 4), ("double2", 2), ("float2", 2), ("half2", 2),
                ("__half2", 2), ("__nv_bfloat162", 2), ("int2", 2))
_CUDA_ATOMIC = re.compile(r"\batomic(?:Add|Sub|Max|Min|CAS|Exch|And|Or|Xor|Inc|Dec)(?:_block|_system)?\s*\(")
_BLOCK_NAME = re.compile(r"(?i)^(block|tile)(_size)?(_[a-z0-9]+)?$|^block_[a-z0-9_]+$|^threads(_per_block)?$")
_C_BLOCK = re.compile(r"(?:#define\s+|\b(?:const\s+)?(?:int|size_t|unsigned|constexpr\s+int)\s+)"
                      r"((?i:block_?size\w*|threads\w*|block_?dim\w*|tile\w*))\s*=?\s*(\d+)")
_TORCH_MODULES = ("torch", "F", "nn", "functional", "fn")


def _dotted(node: ast.AST) -> str:
    """`a.b.c` for an attribute chain, '' for anything else."""
    return dotted_name(node) or ""


def _int_values(nodes: Iterable[ast.AST]) -> list[int]:
    return [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, int)
            and not isinstance(n.value, bool)]


def _cuda_k_loops(code: str) -> int:
    """for-loops whose body holds a __syncthreads: the tile loop of a shared-memory kernel."""
    count = 0
    for match in re.finditer(r"\bfor\s*\(", code):
        start = code.find("{", match.end())
        if start < 0:
            continue
        depth, i = 0, start
        while i < len(code):
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            if depth == 0:
                break
            i += 1
        count += "__syncthreads" in code[start:i]
    return count


def _cuda_features(code: str) -> dict[str, Scalar]:
    code_no_comments = re.sub(r"//[^\n]*|/\*.*?\*/", "", code, flags=re.DOTALL)
    widths = [w for name, w in _CUDA_VECTOR if re.search(rf"\b{re.escape(name)}\b", code_no_comments)]
    bodies = re.split(r"__global__", code_no_comments)[1:]
    return {
        "code_cuda_kernels": len(bodies),
        "code_vector_width": max(widths, default=1),
        "_cuda_shared": "__shared__" in code_no_comments,
        "_cuda_transcendentals": len(_CUDA_TRANSCENDENTAL.findall(code_no_comments)),
        "_cuda_fast_math": bool(_CUDA_FAST_MATH.search(code)),
        "_cuda_atomics": len(_CUDA_ATOMIC.findall(code_no_comments)),
        "_cuda_branches": sum(len(re.findall(r"\bif\s*\(", b)) for b in bodies),
        "_cuda_sync": len(re.findall(r"__syncthreads\s*\(", code_no_comments)),
        "_cuda_k_loops": _cuda_k_loops(code_no_comments),
        "_cuda_blocks": [int(v) for _, v in _C_BLOCK.findall(code_no_comments)]
        + [int(v) for v in re.findall(r"<<<[^,>]+,\s*(\d+)", code_no_comments)],
        "_cuda_eviction": bool(re.search(r"__ldg|__ldcs|__ldcg|__stcs|__stcg|__ldlu", code_no_comments)),
    }


def _triton_kernel_stats(kernels: list[ast.FunctionDef]) -> dict[str, int | bool]:
    stats = {"dots": 0, "k_loops": 0, "transcendentals": 0, "atomics": 0, "wheres": 0, "barriers": 0,
             "tf32": False, "eviction": False}
    for kernel in kernels:
        for node in ast.walk(kernel):
            if isinstance(node, (ast.For, ast.While)) and any(
                    isinstance(c, ast.Call) and _dotted(c.func).endswith(".dot") for c in ast.walk(node)):
                outer = any(node is not inner and node in list(ast.walk(inner))
                            for inner in ast.walk(kernel) if isinstance(inner, (ast.For, ast.While)))
                stats["k_loops"] += not outer
            if not isinstance(node, ast.Call):
                continue
            name = _dotted(node.func)
            leaf = name.split(".")[-1]
            if name.endswith(".dot"):
                stats["dots"] += 1
                for kw in node.keywords:
                    value = getattr(kw.value, "value", None)
                    if (kw.arg == "allow_tf32" and value is True) or (
                            kw.arg == "input_precision" and isinstance(value, str) and "tf32" in value):
                        stats["tf32"] = True
            elif leaf in _TL_TRANSCENDENTAL and name.split(".")[0] in ("tl", "triton", "libdevice", "tlm"):
                stats["transcendentals"] += 1
            elif leaf.startswith("atomic_"):
                stats["atomics"] += 1
            elif name in ("tl.where", "triton.language.where"):
                stats["wheres"] += 1
            elif leaf == "debug_barrier":
                stats["barriers"] += 1
            if leaf in ("load", "store") and any(k.arg in ("eviction_policy", "cache_modifier") for k in node.keywords):
                stats["eviction"] = True
    return stats


_SCALAR_CALLS = frozenset("size numel stride dim len int float cdiv next_power_of_2 min max abs round "
                          "ceil floor sqrt prod".split())


def _is_scalar(expr: ast.AST, scalars: set[str]) -> bool:
    """Whether an expression is plain Python arithmetic on sizes and constants (no tensor work)."""
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Name):
        return expr.id in scalars or expr.id.isupper()
    if isinstance(expr, ast.Attribute):
        return expr.attr in ("shape", "ndim") or _dotted(expr).startswith("math.")
    if isinstance(expr, ast.Subscript):
        return _is_scalar(expr.value, scalars)
    if isinstance(expr, ast.Call):
        return _dotted(expr.func).split(".")[-1] in _SCALAR_CALLS
    if isinstance(expr, ast.BinOp):
        return _is_scalar(expr.left, scalars) and _is_scalar(expr.right, scalars)
    if isinstance(expr, ast.UnaryOp):
        return _is_scalar(expr.operand, scalars)
    if isinstance(expr, (ast.Tuple, ast.List)):
        return all(_is_scalar(e, scalars) for e in expr.elts)
    return False


def _scalar_names(fn: ast.FunctionDef) -> set[str]:
    """Local names bound to sizes or constants (`n = x.numel()`, `M, K = a.shape`)."""
    scalars: set[str] = set()
    assigns = [n for n in ast.walk(fn) if isinstance(n, ast.Assign)]
    for _ in range(3):  # names built from other scalar names
        for a in assigns:
            if _is_scalar(a.value, scalars):
                for t in a.targets:
                    scalars.update(e.id for e in ast.walk(t) if isinstance(e, ast.Name))
    return scalars


def _launch_count(tree: ast.Module, triton_names: set[str], extension_names: set[str],
                  module_attrs: dict[str, str]) -> tuple[int, int] | None:
    """Kernel launch sites reached from ModelNew.forward through self-methods and module functions,
    and how many of them call a recurrent layer (nn.RNN, nn.LSTM, nn.GRU: a site that launches per
    time step, which only the problem's shapes can count)."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    model = classes.get("ModelNew")
    if model is None:
        return None
    methods = {f.name: f for f in model.body if isinstance(f, ast.FunctionDef)}
    functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    if "forward" not in methods:
        return None
    seen: set[int] = set()
    count = recurrent = 0

    def walk(fn: ast.FunctionDef) -> None:
        nonlocal count, recurrent
        if id(fn) in seen:
            return
        seen.add(id(fn))
        scalars = _scalar_names(fn)
        skipped = {id(n) for sub in ast.walk(fn) if isinstance(sub, (ast.Lambda, ast.Subscript))
                   for n in ast.walk(sub.body if isinstance(sub, ast.Lambda) else sub.slice)}
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and id(node) not in skipped and not _is_scalar(node, scalars):
                count += 1  # tensor arithmetic: one eager kernel per operator
                continue
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Subscript) and _dotted(func.value) in triton_names:
                count += 1
                continue
            name = _dotted(func)
            head, leaf = name.split(".")[0] if name else "", name.split(".")[-1] if name else ""
            if name.startswith("self.") and leaf in methods and name.count(".") == 1:
                walk(methods[leaf])
            elif name in functions:
                walk(functions[name])
            elif head in extension_names and name.count(".") == 1:
                count += 1
            elif name.startswith("self.") and name.count(".") == 1 and leaf in module_attrs:
                count += op_family(module_attrs[leaf]) not in ("view", "other")
                recurrent += op_family(module_attrs[leaf]) == "recurrent"
            elif head in _TORCH_MODULES or isinstance(func, ast.Attribute):
                family = op_family(canonical(leaf))
                count += family not in ("view", "other") and canonical(leaf) not in ("empty", "empty_like")
    walk(methods["forward"])
    return count, recurrent


def candidate_features(source: str) -> Features:
    """Static features of a candidate (ModelNew) source; nothing in it is executed."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        reason = f"the candidate does not parse (line {exc.lineno}: {exc.msg})"
        return Features({}, {"code_language": reason})
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    kernels = [f for f in functions if any(is_jit(d) for d in f.decorator_list)]
    autotune = any(_dotted(d.func if isinstance(d, ast.Call) else d).endswith("autotune")
                   for f in functions for d in f.decorator_list)
    stats = _triton_kernel_stats(kernels)
    cuda = _cuda_features(cuda_sources(tree))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    names = {_dotted(c.func) for c in calls}
    attributes = {_dotted(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    extension_names = {t.id for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                       and (_dotted(n.value.func).endswith("load_inline")
                            or _dotted(n.value.func).endswith("cpp_extension.load"))
                       for t in n.targets if isinstance(t, ast.Name)}
    module_attrs = {t.attr: canonical(_dotted(n.value.func).split(".")[-1]) for n in ast.walk(tree)
                    if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                    for t in n.targets if isinstance(t, ast.Attribute) and _dotted(n.value.func)}
    launch_kw = [k for c in calls for k in c.keywords]
    blocks = _int_values(k.value for k in launch_kw if k.arg and _BLOCK_NAME.match(k.arg))
    blocks += _int_values(n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                          and any(isinstance(t, ast.Name) and _BLOCK_NAME.match(t.id) for t in n.targets))
    blocks += _int_values(n.value for n in ast.walk(tree) if isinstance(n, ast.AnnAssign) and n.value
                          and isinstance(n.target, ast.Name) and _BLOCK_NAME.match(n.target.id))
    for f in kernels:  # constexpr defaults: def k(..., BLOCK_SIZE: tl.constexpr = 1024)
        args = f.args.args[len(f.args.args) - len(f.args.defaults):]
        blocks += _int_values(d for a, d in zip(args, f.args.defaults) if _BLOCK_NAME.match(a.arg))
    blocks += _int_values(v for c in calls if _dotted(c.func).endswith("Config") and c.args
                          and isinstance(c.args[0], ast.Dict)
                          for k, v in zip(c.args[0].keys, c.args[0].values)
                          if isinstance(k, ast.Constant) and _BLOCK_NAME.match(str(k.value)))
    blocks += cuda.pop("_cuda_blocks")
    tf32 = stats["tf32"] or any(a.endswith("allow_tf32") for a in attributes) and any(
        isinstance(n, ast.Assign) and any(_dotted(t).endswith("allow_tf32") for t in n.targets)
        and getattr(n.value, "value", None) is True for n in ast.walk(tree))
    tf32 = tf32 or any(_dotted(c.func).endswith("set_float32_matmul_precision") and c.args
                       and getattr(c.args[0], "value", "") in ("high", "medium") for c in calls)
    n_triton, n_cuda = len(kernels), int(cuda.pop("code_cuda_kernels"))
    values: dict[str, Scalar] = {
        "code_language": "mixed" if n_triton and n_cuda else "triton" if n_triton else "cuda" if n_cuda else "torch",
        "code_triton_kernels": n_triton,
        "code_cuda_kernels": n_cuda,
        "code_custom_kernels": n_triton + n_cuda,
        "code_k_loops": int(stats["k_loops"]) + int(cuda.pop("_cuda_k_loops")),
        "code_uses_tl_dot": stats["dots"] > 0,
        "code_uses_shared_memory": stats["dots"] > 0 or bool(cuda.pop("_cuda_shared")),
        "code_transcendentals": int(stats["transcendentals"]) + int(cuda.pop("_cuda_transcendentals")),
        "code_uses_fast_math": bool(cuda.pop("_cuda_fast_math")),
        "code_atomics": int(stats["atomics"]) + int(cuda.pop("_cuda_atomics")),
        "code_where_count": int(stats["wheres"]) + int(cuda.pop("_cuda_branches")),
        "code_syncthreads": int(stats["barriers"]) + int(cuda.pop("_cuda_sync")),
        "code_uses_autotune": autotune,
        "code_eviction_hints": bool(stats["eviction"]) or bool(cuda.pop("_cuda_eviction")),
        "code_uses_cuda_graph": bool({"torch.cuda.CUDAGraph", "torch.cuda.graph", "torch.cuda.make_graphed_callables"}
                                     & (names | attributes)),
        "code_uses_torch_compile": "torch.compile" in names or any(
            _dotted(d.func if isinstance(d, ast.Call) else d) == "torch.compile"
            for f in functions for d in f.decorator_list),
        "code_uses_tf32": bool(tf32),
        "code_uses_channels_last": "torch.channels_last" in attributes,
    }
    unavailable: dict[str, str] = {}
    if n_cuda:
        values["code_vector_width"] = int(cuda["code_vector_width"])
    else:
        unavailable["code_vector_width"] = "no CUDA source; Triton chooses vector widths itself"
    if blocks:
        values["code_block_size"] = max(blocks)
    else:
        unavailable["code_block_size"] = "no BLOCK-style constant in the candidate"
    for key, name in (("num_warps", "code_num_warps"), ("num_stages", "code_num_stages")):
        found = _int_values(k.value for k in launch_kw if k.arg == key)
        if found:
            values[name] = max(found)
        else:
            unavailable[name] = f"the candidate passes no {key}"
    launches = _launch_count(tree, {k.name for k in kernels}, extension_names, module_attrs)
    if launches is None:
        for name in ("code_launches_per_forward", "code_recurrent_calls"):
            unavailable[name] = "the candidate defines no ModelNew.forward"
    else:
        values["code_launches_per_forward"], values["code_recurrent_calls"] = launches
    return Features(values, unavailable)
