"""report.md and report.html of an evaluation, and `kskill eval compare A B`.

The content is built once, as sections of paragraphs, tables and figures, and rendered twice:
Markdown (figures as files under plots/) and one self-contained HTML page (figures embedded as
data URIs, no network). Every report states both scores side by side with its protocol card.
"""

from __future__ import annotations

import base64
import functools
import html
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kskill.agents.gpus import lookup
from kskill.graph_schema.model import Condition
from kskill.graph_schema.skillbase import read_builtin
from kskill.eval.metrics import P_VALUES, geomean
from kskill.eval.plots import PLOTS, draw_all

# KernelSkill (Sun et al., "KernelSkill: A Multi-Agent Framework for GPU Kernel Optimization",
# arXiv:2603.10085, 2026), abstract: average speedups over Torch Eager on KernelBench levels 1-3.
KERNELSKILL = {"1": 5.44, "2": 2.82, "3": 1.92}
KERNELSKILL_CITATION = ("Sun et al., KernelSkill: A Multi-Agent Framework for GPU Kernel Optimization, "
                        "arXiv:2603.10085 (2026)")
# `kskill eval compare`: A counts as reaching B within this share of B's speedup.
WITHIN = 0.03
# The report names a reason for every problem where kskill is below this share of torch.compile's speed.
BELOW_COMPILE = 0.9
# A memory-bound problem counts as at its roofline when kskill's time is within this factor of the roofline's.
NEAR_ROOFLINE = 1.25
LAUNCH_BOUND = "launch_bound_estimate"  # the skill base's bottleneck whose signature tells a launch-bound forward


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]


@dataclass
class Figure:
    path: Path
    caption: str


@dataclass
class Section:
    title: str
    blocks: list[str | Table | Figure] = field(default_factory=list)


def fmt(value: Any, spec: str = ".2f", suffix: str = "") -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return f"{value:{spec}}{suffix}"
    return str(value)


def tolerance(value: float) -> str:
    """1e-4, not 0.0001."""
    return f"{value:.0e}".replace("e-0", "e-")


def share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


# ------------------------------------------------------------------------------ content

def protocol_card(meta: dict[str, Any]) -> Section:
    s, b = meta["settings"], meta["settings"]["baselines"]
    timing = ("CUDA events on the current stream, functions interleaved in one process, median of "
              f"at least {b['timing']['min_reps']} calls after {b['timing']['warmup_ms']:g} ms of warm-up"
              if meta["representative"] else "perf_counter on the CPU (not representative)")
    flush = (f"a {meta['l2_flush_bytes'] / 1e6:.0f} MB buffer zeroed before every timed call"
             if meta.get("l2_flush_bytes") else "none (CPU)")
    optimize_tol = (f"atol={s['atol']}, rtol={s['rtol']}" if s.get("atol") is not None or s.get("rtol") is not None
                    else "its per-dtype default (1e-4 for fp32)")
    strict, compatible = b["tolerances"]["strict"], b["tolerances"]["compatible"]
    card = Table(["", "strict", "KernelSkill-compatible"], [
        ["tolerance", f"atol = rtol = {tolerance(strict)}", f"atol = rtol = {tolerance(compatible)}"],
        ["input sets checked", str(b["trials"]), f"{b['trials']} (the same sets)"],
        ["mean of speedups", "geometric (arithmetic beside it)", "arithmetic, as the KernelSkill paper reports"],
        ["L2 flush", flush, flush],
        ["timing", timing, "the same measurement"],
        ["extra column", "KernelBench's static rules for a Triton backend", "-"],
    ])
    facts = Table(["", ""], [
        ["GPU", ", ".join(meta.get("gpus") or ["-"])], ["driver", meta.get("driver", "-")],
        ["torch / triton", f"{', '.join(meta.get('torch') or ['-'])} / {', '.join(meta.get('triton') or ['-'])}"],
        ["kskill", f"{meta.get('kskill_version')} ({meta.get('git_commit')})"],
        ["suite", f"{meta['suite']} ({meta['selected']} problems selected{meta.get('sample_note', '')})"],
        ["kskill optimize", f"brain {s.get('brain') or 'default'}, iterations {s.get('iterations') or 'default'}, "
                            f"time limit {fmt(s.get('time_limit_s'), 'g', ' s') if s.get('time_limit_s') else 'default'}, "
                            f"tolerance {optimize_tol}"
                            + (f", also {' '.join(s['optimize_options'])}" if s.get("optimize_options") else "")],
        ["torch.compile modes", ", ".join(s["compile_modes"]) or "none (no GPU)"],
        ["written", meta.get("written_at", "-")],
    ])
    note = ("Both scores are computed from the same runs: `kskill optimize` searched at the tolerance above, and "
            "the returned module, eager and every torch.compile mode were then checked at both tolerances on the "
            "same input sets and timed together. A torch.compile result that fails a tolerance is reported and "
            "not used as a baseline at that tolerance.")
    blocks: list[str | Table | Figure] = [card, facts, note]
    if not meta["representative"]:
        blocks.insert(0, "**No GPU: correctness only.** The timings below come from the CPU (Triton's "
                         "interpreter) and say nothing about GPU speed.")
    return Section("Protocol", blocks)


def _groups(summary: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"level {lv}", g) for lv, g in summary["levels"].items()] + [("all", summary["overall"])]


def scores_section(summary: dict[str, Any]) -> Section:
    rows = []
    for name, g in _groups(summary):
        st, co = g["strict"], g["compatible"]
        compiled = st["compile"].get("default", {})
        level = name.removeprefix("level ")
        rows.append([name, str(st["problems"]), f"{st['correct']}", fmt(st["geomean_speedup_eager"], ".2f", "x"),
                     fmt(st["mean_speedup_eager"], ".2f", "x"), share(st["eager"]["fast_1"]),
                     share(compiled.get("fast_1")), f"{st['kb_triton_rules_pass']}",
                     f"{co['correct']}", fmt(co["mean_speedup_eager"], ".2f", "x"),
                     fmt(KERNELSKILL.get(level), ".2f", "x")])
    table = Table(["group", "problems", "strict: correct", "strict: geomean vs eager", "strict: mean vs eager",
                   "strict: fast_1 vs eager", "strict: fast_1 vs compile", "strict: passes KernelBench Triton rules",
                   "compatible: correct", "compatible: mean vs eager", "KernelSkill paper: mean vs eager"], rows)
    return Section("Scores", [table, f"KernelSkill figures: {KERNELSKILL_CITATION}, abstract (levels 1, 2, 3). "
                   "They were measured on their own GPU, problem sizes and sample; set beside ours, not equal to them.",
                   "fast_p: the share of all problems that are correct and more than p times faster (KernelBench's "
                   "definition); means over the correct problems only."])


def fast_p_section(summary: dict[str, Any]) -> Section:
    blocks: list[str | Table | Figure] = []
    for label in ("strict", "compatible"):
        rows = []
        for name, g in _groups(summary):
            s = g[label]
            compiled = s["compile"].get("default", {})
            rows.append([name] + [share(s["eager"][f"fast_{p:g}"]) for p in P_VALUES]
                        + [share(compiled.get(f"fast_{p:g}")) for p in P_VALUES]
                        + [share(compiled.get("share_faster"))])
        headers = (["group"] + [f"fast_{p:g} eager" for p in P_VALUES] + [f"fast_{p:g} compile" for p in P_VALUES]
                   + ["faster than compile"])
        blocks += [f"**{label}**", Table(headers, rows)]
    return Section("fast_p", blocks)


def compile_section(summary: dict[str, Any], modes: list[str]) -> Section:
    rows = []
    for name, g in _groups(summary):
        for mode in modes:
            for label in ("strict", "compatible"):
                c = g[label]["compile"][mode]
                rows.append([name, mode, label, str(c["problems"]), str(c["compile_failed_tolerance"]),
                             str(c["compile_not_run"]), fmt(c["compile_geomean_vs_eager"], ".2f", "x"),
                             fmt(c["geomean_speedup"], ".2f", "x"), fmt(c["mean_speedup"], ".2f", "x"),
                             share(c["share_faster"])])
    return Section("Against torch.compile", [Table(
        ["group", "mode", "tolerance", "compile correct", "compile fails tolerance", "compile did not run",
         "compile geomean vs eager", "kskill geomean vs compile", "kskill mean vs compile", "kskill faster"], rows)])


def problems_section(rows: list[dict[str, Any]], modes: list[str]) -> Section:
    body = []
    for r in rows:
        body.append([r["problem"], r.get("status", "-"), fmt(r.get("correct_strict")), fmt(r.get("correct_compatible")),
                     fmt(r.get("kb_triton_rules")), fmt(r.get("eager_ms"), ".4f"), fmt(r.get("kskill_ms"), ".4f"),
                     fmt(r.get("speedup_eager"), ".2f", "x")]
                    + [fmt(r.get(f"speedup_compile_{m}"), ".2f", "x")
                       + ("" if r.get(f"compile_{m}_correct_strict") or not r.get(f"compile_{m}_ms") else " (fails 1e-4)")
                       for m in modes]
                    + [share(r.get("roofline_fraction")), fmt(r.get("iterations_to_best"), "d"),
                       r.get("techniques") or ("reference" if r.get("returned_reference") else "-"),
                       fmt(r.get("wall_s"), ".0f", " s"), fmt(r.get("tokens"), "d")])
    headers = (["problem", "status", "correct 1e-4", "correct 1e-2", "KB rules", "eager ms", "kskill ms",
                "vs eager"] + [f"vs compile {m}" for m in modes]
               + ["roofline", "iterations to best", "techniques", "wall", "tokens"])
    blocks: list[str | Table | Figure] = [Table(headers, body)]
    failed = [r for r in rows if r.get("error")]
    if failed:
        blocks += ["**Errors**"] + [f"- `{r['problem']}` ({r.get('stage')}): {r['error']}" for r in failed]
    return Section("Problems", blocks)


def below_compile_section(rows: list[dict[str, Any]], mode: str) -> Section | None:
    """Each problem kskill solved below BELOW_COMPILE of torch.compile's speed (compile correct at
    1e-4), with the reason its run gives: what it returned, what failed, what was planned and not written."""
    slow = [r for r in rows if r.get(f"compile_{mode}_correct_strict") and r.get("correct_strict")
            and (r.get(f"speedup_compile_{mode}") or 1.0) < BELOW_COMPILE]
    if not slow:
        return None
    lines = [f"- `{r['problem']}`: {fmt(r[f'speedup_compile_{mode}'], '.2f', 'x')} of torch.compile ({mode}); "
             f"{below_reason(r)}" for r in slow]
    return Section(f"Below {BELOW_COMPILE}x of torch.compile, and why", lines)


def memory_bound(row: dict[str, Any]) -> bool:
    """Whether the problem's arithmetic intensity (its reference's FLOPs over the bytes it must move) is below the
    ridge point of the GPU that ran it, for its dtype on CUDA cores (fp32 work that keeps exact fp32)."""
    spec = lookup(row.get("gpu") or "")
    flops, moved = row.get("flops"), row.get("bytes_moved")
    ridge = spec.ridge_point(row.get("dtype") or "", False) if spec is not None else None
    return bool(ridge and flops is not None and moved) and flops / moved < ridge


def launch_bound(row: dict[str, Any]) -> bool:
    """Whether the skill base's static launch-bound signature (bottlenecks.yaml, LAUNCH_BOUND) holds for the row:
    many kernels, each with less work at the roofline than a launch costs. Such a forward's time is set by its
    launches, so the roofline of its bytes is no bound it could approach."""
    signature = _launch_signature()
    return bool(signature) and all(c.holds(row.get(c.metric)) for c in signature)


@functools.cache
def _launch_signature() -> tuple[Condition, ...]:
    """LAUNCH_BOUND's signature conditions, read from the packaged skill files once."""
    payload = read_builtin().payload
    return tuple(payload.nodes[(e.end_label, e.end)] for e in payload.edges
                 if e.rel == "DETECTED_BY" and e.start == LAUNCH_BOUND)


def roofline_section(rows: list[dict[str, Any]]) -> Section | None:
    """The memory-bound problems kskill solved, against their roofline: how many are within NEAR_ROOFLINE of it,
    and each that is not, with its fraction and what kskill applied. Launch-bound ones are named apart."""
    solved = [r for r in rows if r.get("correct_strict") and r.get("roofline_fraction") and memory_bound(r)]
    launched = [r for r in solved if launch_bound(r)]
    bound = [r for r in solved if r not in launched]
    if not solved:
        return None
    near = [r for r in bound if r["roofline_fraction"] >= 1 / NEAR_ROOFLINE]
    far = sorted((r for r in bound if r not in near), key=lambda r: r["roofline_fraction"])
    head = (f"{len(bound)} problems solved correctly are memory-bound (arithmetic intensity below the GPU's "
            f"CUDA-core ridge point for their dtype); {len(near)} of them run within {NEAR_ROOFLINE}x of their "
            f"roofline (at least {1 / NEAR_ROOFLINE:.0%} of it). The roofline is max(FLOPs / peak, bytes / DRAM "
            "bandwidth) over the reference's inputs and outputs, with the vendor's peak bandwidth.")
    table = Table(["problem", "FLOP/byte", "roofline ms", "kskill ms", "roofline", "techniques"],
                  [[f"`{r['problem']}`", fmt(r["flops"] / r["bytes_moved"], ".2f"), fmt(r.get("roofline_ms"), ".3f"),
                    fmt(r.get("kskill_ms"), ".3f"), share(r["roofline_fraction"]), r.get("techniques") or "reference"]
                   for r in far])
    apart = [f"{len(launched)} more {'is' if len(launched) == 1 else 'are'} launch-bound by the static estimate ({LAUNCH_BOUND}: "
             f"{', '.join(_launch_text(r) for r in launched)}): kernel launches, not bytes, set "
             f"{'its' if len(launched) == 1 else 'their'} time."] \
        if launched else []
    return Section("Memory-bound problems against their roofline", [head] + ([table] if far else []) + apart)


def _launch_text(row: dict[str, Any]) -> str:
    return (f"`{row['problem']}` {row['est_kernel_launches']} kernels of {row['est_launch_work_us']:.2f} us each, "
            f"{share(row['roofline_fraction'])} of its roofline")


def below_reason(row: dict[str, Any]) -> str:
    """Why a run's result is what it is, in its own records' words."""
    if row.get("returned_reference"):
        parts = [f"returned the reference (stopped: {row.get('stop_reason') or '-'})"]
    else:
        parts = [f"best {row.get('techniques') or '-'}, {fmt(row.get('speedup_eager'), '.2f', 'x')} of eager"
                 f" (stopped: {row.get('stop_reason') or '-'})"]
    failed: dict[str, list[str]] = {}
    for step in row.get("trajectory") or []:
        if step.get("status") not in ("verified", "unreviewed", "pending", None):
            failed.setdefault(step["status"], []).append(step.get("technique") or "")
    if failed:
        parts.append("attempts failed: " + ", ".join(f"{len(techniques)} {status}{_by_technique(techniques)}"
                                                      for status, techniques in sorted(failed.items())))
    unwritten = [f"{key} ({why})" for key, why in (row.get("not_written") or {}).items()]
    if unwritten:
        parts.append("planned, no code written: " + "; ".join(unwritten))
    kernels = row.get("kernels") or {}
    parts += [f"{'kskill' if name == 'kskill' else name.replace('_', ' ', 1)}'s call: {kernel_text(k)}"
              for name, k in kernels.items()]
    ours, theirs = (_conversion_ms(kernels.get(name)) for name in ("kskill", "compile_default"))
    if ours and theirs == 0:
        parts.append(f"layout conversions take {ours:.3f} ms of kskill's call and none of torch.compile's slowest "
                     "kernels")
    return "; ".join(parts)


def _by_technique(techniques: list[str]) -> str:
    """Which techniques the failed attempts applied, as ' (channels_last x2, fused_normalization)'."""
    counts = Counter(t for t in techniques if t)
    named = [f"{t} x{n}" if n > 1 else t for t, n in sorted(counts.items())]
    return f" ({', '.join(named)})" if named else ""


# Kernels that only change a tensor's memory layout: cuDNN's own around an NHWC kernel fed NCHW data, and kskill's.
LAYOUT_KERNEL = re.compile(r"nchwToNhwc|nhwcToNchw|convertTensor|_nchw_to_nhwc", re.I)


def _conversion_ms(kernels: dict[str, Any] | None) -> float | None:
    """The time a profiled call's slowest kernels spend converting layouts (None when it was not profiled)."""
    if not kernels:
        return None
    return sum(k["ms"] for k in kernels.get("top", []) if LAYOUT_KERNEL.search(k["name"]))


def kernel_text(kernels: dict[str, Any]) -> str:
    """One profiled call's kernels: how many, their GPU time, the slowest three."""
    top = ", ".join(f"{k['name'][:60]} {k['ms']:.3f} ms" + (f" x{k['calls']}" if k["calls"] > 1 else "")
                    for k in kernels.get("top", [])[:3])
    n = kernels.get("launches")
    return f"{n} kernel{'' if n == 1 else 's'}, {kernels.get('gpu_ms', 0):.3f} ms on the GPU ({top})"


def build_report(meta: dict[str, Any], summary: dict[str, Any], rows: list[dict[str, Any]],
                 out: Path) -> list[Section]:
    modes = list(meta["settings"]["compile_modes"])
    figures = draw_all(rows, summary, out / "plots", meta["representative"])
    run = summary["overall"]["run"]
    head = (f"{len(rows)} of {meta['selected']} problems finished"
            + ("" if len(rows) >= meta["selected"] else " (continue with `kskill eval ... --resume`)")
            + f"; {run['returned_reference']} returned the reference; wall time {run['wall_s'] / 60:.1f} min in "
            f"all; mean iterations to the best {fmt(run['mean_iterations_to_best'], '.1f')}; "
            f"LLM tokens {run['tokens']}, cost ${run['cost_usd']:.2f}. Review time per candidate after the seed "
            f"(median of {run['batches_after_seed']} batches): {fmt(run['median_review_s_per_candidate'], '.1f', ' s')}; "
            f"slowest seed review {fmt(run['max_seed_review_s'], '.1f', ' s')}; " + _overrun(run['max_overrun_s']) + ".")
    sections = [Section("Summary", [head]), protocol_card(meta), scores_section(summary), fast_p_section(summary)]
    if modes:
        sections.append(compile_section(summary, modes))
    sections.append(Section("Figures", [Figure(path, PLOTS[name]) for name, path in figures.items()]
                            or ["No figure: nothing was timed and correct."]))
    sections.append(problems_section(rows, modes))
    below = below_compile_section(rows, modes[0]) if modes else None
    return sections + [s for s in (below, roofline_section(rows)) if s is not None]


# ------------------------------------------------------------------------------ rendering

def to_markdown(title: str, sections: list[Section], base: Path) -> str:
    lines = [f"# {title}", ""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, Table):
                lines.append("| " + " | ".join(block.headers) + " |")
                lines.append("|" + "---|" * len(block.headers))
                lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in block.rows]
            elif isinstance(block, Figure):
                lines.append(f"![{block.caption}]({block.path.relative_to(base).as_posix()})")
            else:
                lines.append(block)
            lines.append("")
    return "\n".join(lines)


STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;margin:0.6em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px;text-align:left}
th{background:#f2f2f2}img{max-width:640px;margin:0.5em 1em 0.5em 0;border:1px solid #ddd}figure{display:inline-block}"""
# Marks each figure once the page has loaded: data-rendered="yes" when the image decoded.
MARK_IMAGES = """window.addEventListener('load',function(){document.querySelectorAll('img').forEach(function(i){
var ok=i.complete&&i.naturalWidth>0;i.setAttribute('data-rendered',ok?'yes':'no');if(!ok){i.alt='figure missing: '+i.alt;}});});"""


def _inline(text: str) -> str:
    """The little Markdown the sections use: **bold**, `code`, leading '- '."""
    escaped = html.escape(text)
    parts = escaped.split("**")
    escaped = "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))
    parts = escaped.split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def to_html(title: str, sections: list[Section]) -> str:
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
           f"<style>{STYLE}</style><script>{MARK_IMAGES}</script></head><body><h1>{html.escape(title)}</h1>"]
    for section in sections:
        out.append(f"<h2>{html.escape(section.title)}</h2>")
        for block in section.blocks:
            if isinstance(block, Table):
                out.append("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in block.headers) + "</tr>")
                out += ["<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in block.rows]
                out.append("</table>")
            elif isinstance(block, Figure):
                data = base64.b64encode(block.path.read_bytes()).decode()
                out.append(f"<figure><img src='data:image/png;base64,{data}' alt='{html.escape(block.caption)}'>"
                           f"<figcaption>{html.escape(block.caption)}</figcaption></figure>")
            elif block.startswith("- "):
                out.append(f"<ul><li>{_inline(block[2:])}</li></ul>")
            else:
                out.append(f"<p>{_inline(block)}</p>")
    out.append("</body></html>")
    return "\n".join(out)


def write_report(out: Path, meta: dict[str, Any], summary: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    title = f"kskill eval: {Path(meta['suite']).name}"
    sections = build_report(meta, summary, rows, out)
    (out / "report.md").write_text(to_markdown(title, sections, out))
    (out / "report.html").write_text(to_html(title, sections))


# ------------------------------------------------------------------------------ compare

def compare_sections(a: dict[str, Any], b: dict[str, Any], names: tuple[str, str]) -> list[Section]:
    """Scores of two evaluations side by side, then the problems both ran."""
    rows = []
    groups_b = dict(_groups(b["summary"]))
    for name, ga in _groups(a["summary"]):
        gb = groups_b.get(name)
        if gb is None:
            continue
        for label, key, kind in (("strict", "geomean_speedup_eager", "geomean vs eager"),
                                 ("compatible", "mean_speedup_eager", "mean vs eager")):
            va, vb = ga[label][key], gb[label][key]
            rows.append([name, f"{label}: {kind}", fmt(va, ".2f", "x"), fmt(vb, ".2f", "x"),
                         fmt(vb / va if va and vb else None, ".2f", "x")])
            rows.append([name, f"{label}: correct", f"{ga[label]['correct']}/{ga[label]['problems']}",
                         f"{gb[label]['correct']}/{gb[label]['problems']}", "-"])
        ca, cb = ga["strict"]["compile"].get("default", {}), gb["strict"]["compile"].get("default", {})
        rows.append([name, "strict: geomean vs compile", fmt(ca.get("geomean_speedup"), ".2f", "x"),
                     fmt(cb.get("geomean_speedup"), ".2f", "x"), "-"])
    by_problem_b = {r["problem"]: r for r in b["rows"]}
    per_problem, correct_pairs, against_compile = [], [], []
    for ra in a["rows"]:
        rb = by_problem_b.get(ra["problem"])
        if rb is None:
            continue
        sa, sb = ra.get("speedup_eager"), rb.get("speedup_eager")
        if ra.get("correct_strict") and rb.get("correct_strict") and sa and sb:
            correct_pairs.append((sa, sb))
            ca, cb = ra.get("speedup_compile_default"), rb.get("speedup_compile_default")
            if ca and cb and ra.get("compile_default_correct_strict") and rb.get("compile_default_correct_strict"):
                against_compile.append((ca, cb))
        per_problem.append([ra["problem"], fmt(ra.get("correct_strict")), fmt(rb.get("correct_strict")),
                            fmt(sa, ".2f", "x"), fmt(sb, ".2f", "x"), fmt(sb / sa if sa and sb else None, ".2f", "x"),
                            ra.get("techniques") or "-", rb.get("techniques") or "-"])
    only = sorted(set(r["problem"] for r in a["rows"]) ^ set(by_problem_b))
    cards = Table(["", names[0], names[1]], [
        [key, str(a["meta"].get(key)), str(b["meta"].get(key))]
        for key in ("gpus", "torch", "triton", "kskill_version", "git_commit", "representative", "written_at")]
        + [["settings", "", "same" if a["meta"]["settings"] == b["meta"]["settings"] else "differ (see eval.json)"]])
    sections = [Section("Protocols", [cards]),
                Section("Scores", [Table(["group", "figure", names[0], names[1], "B / A"], rows)]),
                Section("Problems in both", [
                    _within(correct_pairs) + _against_compile(against_compile),
                    Table(["problem", "A correct 1e-4", "B correct 1e-4", "A vs eager", "B vs eager", "B / A",
                           "A techniques", "B techniques"], per_problem)])]
    if only:
        sections.append(Section("In one of them only", [", ".join(only)]))
    return sections


def _within(pairs: list[tuple[float, float]]) -> str:
    """How often A reaches B's speedup less 3 % (the default search against --exhaustive, say)."""
    close = sum(1 for sa, sb in pairs if sa >= (1 - WITHIN) * sb)
    return (f"A is within {WITHIN:.0%} of B's speedup over eager, or faster, on {close} of the {len(pairs)} "
            "problems both got correct at 1e-4.")


def _against_compile(pairs: list[tuple[float, float]]) -> str:
    """A's and B's geometric means against torch.compile (default mode) on the same problems."""
    if not pairs:
        return ""
    ga, gb = geomean(a for a, _ in pairs), geomean(b for _, b in pairs)
    return (f" On the {len(pairs)} of them where torch.compile (default) is correct too, the geometric mean "
            f"against it is {ga:.3f}x for A and {gb:.3f}x for B.")


def _overrun(seconds: float | None) -> str:
    """The largest overrun of optimize's time limit, in words (none: every run ended within it)."""
    if seconds is None:
        return "no time limit"
    if seconds <= 0:
        return f"no run went past its time limit (the longest ended {-seconds:.1f} s before it)"
    return f"largest overrun of the time limit {seconds:.1f} s"
