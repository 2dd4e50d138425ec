"""The Planner: a deterministic, ranked choice of the next techniques and their variants, made of
graph queries.

1. Bottleneck signatures are evaluated inside Cypher against the observation map.
2. The techniques addressing the matched bottlenecks are checked against their REQUIRES and
   FORBIDDEN_WHEN conditions, again inside Cypher.
3. Short-term memory removes what this lineage already applied, what conflicts with it, what
   was already tried from the same parent (tabu), a named variant that failed the tolerance
   anywhere in the run, and a technique that failed it from two parents of the run and passed from
   none; the brain may decline what it cannot apply.
4. The rest is ranked by edge priority, expected gain, the prior learned from past runs, then id.
5. The first `width` techniques (0: all) are chosen, each with the variants the graph allows:
   a variant's own guards are evaluated like a technique's, and a variant already tried from this
   parent, or that the brain could not write here before, is ruled out with the reason.

The same graph and the same observations give the same Plan, byte for byte (`Plan.to_json`).
When no rule yields a technique, a retrieval fallback may propose one, marked as such.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kskill.graph_schema import planner_queries as q
from kskill.graph_schema.migrations import now_iso
from kskill.graph_schema.model import Scalar, stable_id
from kskill.graph_schema.store import GraphStore

Capability = Callable[[str], tuple[bool, str]]  # technique id -> (can apply here, why not)
Fallback = Callable[[str, int], list[str]]  # description, k -> technique ids, nearest first
MIN_GAIN = 1.01  # a child that does not beat its parent by 1% gained nothing
# A technique that failed the tolerance from this many parents of a run, and passed from none, is not tried
# again in the run: on the H200, level3/27's channels-last children failed it from 6 parents of 14, each
# review spent out of its 60 s (eval/runs/kb60-h200/eval/rows/level3__27_RegNet.json, its trajectory).
TOLERANCE_REPEATS = 2


@dataclass(frozen=True)
class ConditionCheck:
    id: str
    metric: str
    text: str
    held: bool | None  # None: the metric was not observed


@dataclass(frozen=True)
class BottleneckMatch:
    id: str
    name: str
    matched: bool
    checks: list[ConditionCheck]


@dataclass(frozen=True)
class RankedTechnique:
    technique: str
    bottleneck: str | None
    priority: int
    expected_gain: float
    prior: float


@dataclass(frozen=True)
class Guard:
    """The condition that blocks a technique or variant, with its verdict as the query found it."""

    forbidden: bool  # a FORBIDDEN_WHEN condition that holds; else a REQUIRES that does not
    metric: str
    text: str
    held: bool | None  # None: the metric was not observed, or could not be compared


@dataclass(frozen=True)
class Rejection:
    technique: str
    reason: str


@dataclass(frozen=True)
class VariantChoice:
    """One form of a chosen technique. `id` is None for a technique without authored variants."""

    id: str | None
    name: str
    params: dict[str, Any]
    priority: int

    @property
    def key(self) -> str:
        return self.id or ""


@dataclass(frozen=True)
class Choice:
    """A chosen technique, its rank in the plan, and the variants to write it with."""

    technique: str
    bottleneck: str | None
    rank: int
    priority: int
    expected_gain: float
    prior: float
    variants: list[VariantChoice]


@dataclass(frozen=True)
class VariantRejection:
    technique: str
    variant: str
    reason: str


@dataclass(frozen=True)
class Plan:
    id: str
    tier: str  # "rule", "fallback", or "none"
    case: str
    selected: str | None  # the first choice's technique
    bottleneck: str | None
    ranked: list[RankedTechnique]
    rejected: list[Rejection]
    bottlenecks: list[BottleneckMatch]
    observations: dict[str, Scalar]
    unavailable: list[str] = field(default_factory=list)
    chosen: list[Choice] = field(default_factory=list)
    ruled_out: list[VariantRejection] = field(default_factory=list)
    width: int = 1
    derivations: dict[str, str] = field(default_factory=dict)  # metric -> how it was derived
    reasons: dict[str, str] = field(default_factory=dict)  # unavailable metric -> why

    @property
    def matched(self) -> list[BottleneckMatch]:
        return [b for b in self.bottlenecks if b.matched]

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, indent=2)


class Planner:
    def __init__(self, store: GraphStore, statuses: Sequence[str] = ("accepted",),
                 fallback: Fallback | None = None):
        self.store = store
        self.statuses = list(statuses)
        self.fallback = fallback
        # condition id -> (metric, text). A Condition's id is a hash of its metric, operator and
        # operand (model.Condition.of), so what an id names never changes and the cache never goes stale.
        self._conditions: dict[str, tuple[str, str]] = {}

    def plan(self, observations: Mapping[str, Any], parent: str | None = None,
             capability: Capability | None = None, description: str = "", width: int = 1,
             declined: Mapping[str, str] | None = None, derivations: Mapping[str, str] | None = None,
             reasons: Mapping[str, str] | None = None) -> Plan:
        """The plan for `parent` on these observations.

        `width`: how many techniques to choose (0: every admissible one). `declined`: technique or
        variant id -> why the brain could not write it from this parent before. `derivations` and
        `reasons` (how derived metrics were obtained, why others are missing) are kept for the audit.
        """
        obs = {k: v for k, v in sorted(observations.items()) if _usable(v)}
        params = {"obs": obs, "statuses": self.statuses}
        bottlenecks = self._signatures(params)
        matched = [b.id for b in bottlenecks if b.matched]
        guards = self._blocking(q.BLOCKING_GUARDS, {**params, "bottlenecks": matched}) if matched else {}
        edges = self.store.run(q.CANDIDATE_EDGES, {"statuses": self.statuses, "bottlenecks": matched,
                                                   "blocked": sorted(guards)}) if matched else []
        memory = _ShortTermMemory(self.store, parent)
        declined = dict(declined or {})
        if capability is not None:
            capability = functools.cache(capability)  # one verdict per technique, however many edges
        ranked, rejected = _screen(edges, guards, memory, obs, capability, declined)
        tier = "rule"
        if not ranked and self.fallback is not None:
            tier = "fallback"
            proposed = [t for t in self.fallback(description or _describe(obs), 5)
                        if t not in {r.technique for r in rejected}]
            ranked, more = self._screen_proposed(proposed, params, memory, obs, capability, declined)
            rejected += more
        chosen, ruled_out, spent = self._choose(ranked, width, params, memory, obs, declined)
        rejected += spent
        ranked = [r for r in ranked if r.technique not in {s.technique for s in spent}]
        lead = chosen[0] if chosen else None
        picked = {c.technique for c in chosen}
        rejected += [Rejection(r.technique, f"outranked by {lead.technique}") for r in ranked
                     if r.technique not in picked and lead is not None]
        rejected = _one_reason_each(sorted(set(rejected), key=lambda r: (r.technique, r.reason)))
        tier = tier if lead else "none"
        outcome = (tier, [(c.technique, [v.key for v in c.variants]) for c in chosen],
                   [(r.technique, r.reason) for r in rejected], [(r.variant, r.reason) for r in ruled_out])
        unavailable = sorted({c.metric for b in bottlenecks for c in b.checks if c.metric not in obs}
                             | {g.metric for g in guards.values() if not g.forbidden and g.metric not in obs})
        return Plan(
            # The outcome is part of the id: a later decision from the same parent and the same
            # observations (after a child failed, say) is a different Decision.
            id=stable_id("dec", parent or "standalone", obs, self.statuses, width, outcome),
            tier=tier,
            case=_case(lead, tier, bottlenecks, rejected, len(chosen)),
            selected=lead.technique if lead else None,
            bottleneck=lead.bottleneck if lead else None,
            ranked=ranked,
            rejected=rejected,
            bottlenecks=bottlenecks,
            observations=obs,
            unavailable=unavailable,
            chosen=chosen,
            ruled_out=ruled_out,
            width=width,
            derivations={k: v for k, v in sorted((derivations or {}).items()) if k in obs},
            reasons={k: v for k, v in sorted((reasons or {}).items()) if k in unavailable},
        )

    def _signatures(self, params: dict[str, Any]) -> list[BottleneckMatch]:
        """Every bottleneck with the verdict of each signature condition, as the query found them."""
        rows = self.store.run(q.BOTTLENECK_SIGNATURES, params)
        row = rows[0]  # one row, with empty lists on a base without bottlenecks
        holding, unobserved, matched = set(row["holding"]), set(row["unobserved"]), set(row["matched"])
        texts = self._condition_texts({c for _, _, conditions in row["bottlenecks"] for c in conditions})
        return [
            BottleneckMatch(id=bid, name=name, matched=bid in matched, checks=[
                ConditionCheck(c, *texts[c], True if c in holding else None if c in unobserved else False)
                for c in sorted(set(conditions))])
            for bid, name, conditions in sorted(row["bottlenecks"], key=lambda b: b[0])
        ]

    def _condition_texts(self, ids: set[str]) -> dict[str, tuple[str, str]]:
        unknown = sorted(ids - self._conditions.keys())
        if unknown:
            for row in self.store.run(q.CONDITION_TEXTS, {"ids": unknown}):
                self._conditions[row["id"]] = (row["metric"], row["text"])
        return self._conditions

    def _blocking(self, query: str, params: dict[str, Any]) -> dict[str, Guard]:
        """Technique (or variant) id -> the first guard that blocks it, as the query chose it."""
        return {row["id"]: Guard(row["forbidden"], row["metric"], row["text"], row["held"])
                for row in sorted(self.store.run(query, params), key=lambda r: r["id"])}

    def _screen_proposed(self, proposed: list[str], params: dict[str, Any], memory: _ShortTermMemory,
                         obs: Mapping[str, Scalar], capability: Capability | None, declined: Mapping[str, str]
                         ) -> tuple[list[RankedTechnique], list[Rejection]]:
        """The fallback tier: the retrieval's proposals in its order, through the same guards and memory."""
        if not proposed:
            return [], []
        named = {**params, "techniques": proposed}
        known = {r["technique"] for r in self.store.run(q.NAMED_TECHNIQUES, named)}
        guards = self._blocking(q.NAMED_BLOCKING_GUARDS, named)
        # No edge: an untried prior, 1.0 * (0 + 1) / (0 + 2).
        edges = [{"technique": t, "bottleneck": None, "priority": None, "expected_gain": None, "prior": 0.5}
                 for t in proposed if t in known and t not in guards]
        return _screen(edges, guards, memory, obs, capability, declined, by_rank=False)

    def _choose(self, ranked: list[RankedTechnique], width: int, params: dict[str, Any],
                memory: _ShortTermMemory, obs: Mapping[str, Scalar], declined: Mapping[str, str]
                ) -> tuple[list[Choice], list[VariantRejection], list[Rejection]]:
        """The first `width` ranked techniques that keep at least one variant, with those variants;
        the variants ruled out; and the techniques whose every variant was ruled out."""
        techniques = [r.technique for r in ranked]
        authored: dict[str, list[VariantChoice]] = {}
        guards: dict[str, Guard] = {}
        if techniques:
            named = {**params, "techniques": techniques}
            for row in self.store.run(q.TECHNIQUE_VARIANTS, named):
                authored.setdefault(row["technique"], []).append(
                    VariantChoice(row["id"], row["name"], json.loads(row["params"] or "{}"), int(row["priority"])))
            guards = self._blocking(q.VARIANT_BLOCKING_GUARDS, named)
        chosen: list[Choice] = []
        ruled_out: list[VariantRejection] = []
        spent: list[Rejection] = []
        for r in ranked:
            if width and len(chosen) >= width:
                break
            whole = memory.tried_reason(r.technique, "")  # a child that named no variant tried them all
            if whole:
                spent.append(Rejection(r.technique, whole))
                continue
            forms = sorted(authored.get(r.technique) or [VariantChoice(None, "default", {}, 0)],
                           key=lambda v: (-v.priority, v.key))
            kept: list[VariantChoice] = []
            why: list[str] = []
            for v in forms:
                reason = (_guard_reason(guards[v.key], obs) if v.key in guards
                          else memory.tried_reason(r.technique, v.key) or _declined_reason(declined, v.id))
                if not reason:
                    kept.append(v)
                    continue
                why.append(reason)
                if v.id is not None:
                    ruled_out.append(VariantRejection(r.technique, v.id, reason))
            if kept:
                chosen.append(Choice(r.technique, r.bottleneck, len(chosen) + 1, r.priority, r.expected_gain,
                                     r.prior, kept))
            else:
                spent.append(Rejection(r.technique, why[0] if len(why) == 1 else
                                       f"every variant ruled out ({'; '.join(sorted(set(why)))})"))
        return chosen, sorted(ruled_out, key=lambda v: (v.technique, v.variant)), spent

    def record(self, plan: Plan, written: Mapping[str, int] | None = None,
               not_written: Mapping[str, str] | None = None) -> str:
        """Write the Decision subgraph; return the Decision id.

        `written`: variant key (the variant id, or the technique id for a technique without
        variants) -> the attempt written with it; `not_written`: variant key -> why the brain wrote
        nothing (or nothing new) for it. Both are known only after the Optimizer ran.
        """
        written, not_written = dict(written or {}), dict(not_written or {})
        with self.store.transaction() as tx:
            tx.write(q.WRITE_DECISION, {"id": plan.id, "tier": plan.tier, "case": plan.case, "now": now_iso()})
            tx.write(q.WRITE_OBSERVATIONS, {"decision": plan.id, "rows": [
                {"id": stable_id("obs", plan.id, k), "props": {
                    "metric": k, "value": v, "available": True, "derivation": plan.derivations.get(k, "")}}
                for k, v in plan.observations.items()
            ] + [
                {"id": stable_id("obs", plan.id, k), "props": {
                    "metric": k, "available": False, "reason": plan.reasons.get(k, "not observed")}}
                for k in plan.unavailable if k not in plan.observations
            ]})
            tx.write(q.WRITE_MATCHED_BOTTLENECKS, {"decision": plan.id,
                                                   "rows": [{"bottleneck": b.id} for b in plan.matched]})
            tx.write(q.WRITE_MATCHED_CONDITIONS, {"decision": plan.id, "rows": [
                {"condition": c.id} for b in plan.matched for c in b.checks]})
            tx.write(q.WRITE_SELECTED, {"decision": plan.id, "rows": [
                {"technique": c.technique, "bottleneck": c.bottleneck or "", "rank": c.rank,
                 "outcome": _outcome(c, written, not_written)} for c in plan.chosen]})
            tx.write(q.WRITE_REJECTED, {"decision": plan.id, "rows": [
                {"technique": r.technique, "reason": r.reason} for r in plan.rejected]})
            tx.write(q.WRITE_GENERATED, {"decision": plan.id, "rows": [
                {"variant": v.id, "technique": c.technique, "attempt": written[v.key]}
                for c in plan.chosen for v in c.variants if v.id and v.key in written]})
            tx.write(q.WRITE_RULED_OUT, {"decision": plan.id, "rows": [
                {"variant": r.variant, "technique": r.technique, "reason": r.reason} for r in plan.ruled_out
            ] + [
                {"variant": v.id, "technique": c.technique, "reason": f"not written: {not_written[v.key]}"}
                for c in plan.chosen for v in c.variants if v.id and v.key in not_written]})
        return plan.id

    def record_outcome(self, bottleneck: str, technique: str, gain: float) -> None:
        """Teach the skill base: count the trial and fold the gain into the edge's mean."""
        self.store.write(q.RECORD_OUTCOME, {"bottleneck": bottleneck, "technique": technique, "gain": gain,
                                            "min_gain": MIN_GAIN})


class _ShortTermMemory:
    """What this task already tried, read from the trajectory in the graph."""

    def __init__(self, store: GraphStore, parent: str | None):
        self.applied: dict[str, int] = {}
        self.conflicts: dict[str, set[str]] = {}  # technique -> the applied techniques it conflicts with
        self.tried: dict[tuple[str, str], str] = {}  # (technique, variant key) -> why not again
        if parent is None:
            return
        for row in store.run(q.LINEAGE_TECHNIQUES, {"parent": parent}):
            self.applied.setdefault(row["technique"], row["n"])
            for other in row["conflicts"]:
                self.conflicts.setdefault(other, set()).add(row["technique"])
        for row in store.run(q.CHILD_OUTCOMES, {"parent": parent}):
            why = _no_gain(row)
            self.tried.setdefault((row["technique"], row["variant"]), (
                f"tabu: tried from this parent at attempt {row['n']}: {why}" if why else
                f"already tried from this parent at attempt {row['n']} ({row['speedup']:.3f}x)"))
        # A named variant (a dot precision, tile sizes) that failed the tolerance fails it from any
        # parent: its arithmetic on this problem's data does not depend on the code around it.
        for row in store.run(q.RUN_VARIANTS_OUT_OF_TOLERANCE, {"parent": parent}):
            self.tried.setdefault((row["technique"], row["variant"]),
                                  f"tabu: failed the tolerance at attempt {row['n']} of this run")
        # So does a technique of no named variant that failed it from TOLERANCE_REPEATS parents and passed
        # from none: what changes its arithmetic (cuDNN's TF32 kernels under channels-last, a batch norm's own
        # statistics ahead of a TF32 convolution) came with it each time.
        for row in store.run(q.RUN_TECHNIQUES_OUT_OF_TOLERANCE, {"parent": parent, "repeats": TOLERANCE_REPEATS}):
            failed = sorted(row["failed"])
            self.tried.setdefault((row["technique"], ""), (
                f"tabu: failed the tolerance at attempts {', '.join(map(str, failed))} of this run and passed it "
                "at none"))

    def tried_reason(self, technique: str, variant: str) -> str:
        """Why not to write this form of the technique from this parent again ('' for no variant)."""
        return self.tried.get((technique, variant), "")


def _no_gain(row: dict[str, Any]) -> str:
    if not row["correct"]:
        return f"{row['status']}"
    parent, child = row["parent_speedup"] or 1.0, row["speedup"]  # no parent timing: the reference's 1.0
    if child is None:
        return "no timing"
    if child < parent * MIN_GAIN:
        return f"no gain ({child:.3f}x vs parent {parent:.3f}x)"
    return ""


def _screen(edges: list[dict[str, Any]], guards: Mapping[str, Guard], memory: _ShortTermMemory,
            obs: Mapping[str, Scalar], capability: Capability | None, declined: Mapping[str, str],
            by_rank: bool = True) -> tuple[list[RankedTechnique], list[Rejection]]:
    """Rank the techniques no guard blocked, by their best edge, unless memory or the brain rejects them."""
    rejected = [Rejection(tid, _guard_reason(guard, obs)) for tid, guard in guards.items()]
    by_technique: dict[str, list[dict[str, Any]]] = {}
    for edge in edges:
        by_technique.setdefault(edge["technique"], []).append(edge)
    ranked = []
    for tid, rows in by_technique.items():
        reason = _memory_reason(tid, memory) or _declined_reason(declined, tid)
        if not reason and capability is not None:
            ok, why = capability(tid)
            reason = "" if ok else f"the brain cannot apply it here: {why}"
        if reason:
            rejected.append(Rejection(tid, reason))
        else:
            ranked.append(min((_ranked(row) for row in rows), key=lambda r: (_rank_key(r), r.bottleneck or "")))
    if by_rank:
        ranked.sort(key=_rank_key)
    return ranked, rejected


def _ranked(edge: dict[str, Any]) -> RankedTechnique:
    return RankedTechnique(technique=edge["technique"], bottleneck=edge["bottleneck"],
                           priority=int(edge["priority"] or 0), expected_gain=float(edge["expected_gain"] or 1.0),
                           prior=round(float(edge["prior"]), 6))


def _rank_key(t: RankedTechnique) -> tuple:
    return (-t.priority, -t.expected_gain, -t.prior, t.technique)


def _guard_reason(guard: Guard, obs: Mapping[str, Scalar]) -> str:
    """Why the query found the technique blocked: a precondition unmet or unobserved, or an exclusion."""
    if guard.forbidden:
        return f"forbidden when {guard.text}: it holds"
    if guard.held is not None:
        return f"requires {guard.text}: not met"
    if guard.metric not in obs:
        return f"requires {guard.text}: {guard.metric} was not observed"
    return f"requires {guard.text}: the observed {guard.metric}={obs[guard.metric]!r} cannot be compared"


def _declined_reason(declined: Mapping[str, str], key: str | None) -> str:
    return f"the brain could not write it from this parent: {declined[key]}" if key in declined else ""


def _outcome(choice: Choice, written: Mapping[str, int], not_written: Mapping[str, str]) -> str:
    """What became of a chosen technique once the Optimizer ran (empty while it has not)."""
    attempts = [str(written[v.key]) for v in choice.variants if v.key in written]
    if attempts:
        return f"written as attempt {', '.join(attempts)}"
    reasons = [not_written[v.key] for v in choice.variants if v.key in not_written]
    return f"not written: {reasons[0]}" if reasons else ""


def _usable(value: Any) -> bool:
    """Values a query can compare: non-finite floats count as not observed."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (str, int, bool))


def _memory_reason(tid: str, memory: _ShortTermMemory) -> str:
    if tid in memory.applied:
        return f"already applied in this lineage (attempt {memory.applied[tid]})"
    clash = sorted(memory.conflicts.get(tid, ()))
    if clash:
        return f"conflicts with {clash[0]}, applied in this lineage (attempt {memory.applied[clash[0]]})"
    return ""


def _one_reason_each(rejected: list[Rejection]) -> list[Rejection]:
    seen: dict[str, Rejection] = {}
    for r in rejected:
        seen.setdefault(r.technique, r)
    return list(seen.values())


def _case(lead: Choice | None, tier: str, bottlenecks: list[BottleneckMatch], rejected: list[Rejection],
          chosen: int) -> str:
    matched = [b.id for b in bottlenecks if b.matched]
    if lead is None:
        if not matched:
            return "no bottleneck signature holds for these observations"
        return f"matched {', '.join(matched)} but every technique was rejected ({len(rejected)})"
    more = f"; {chosen - 1} more chosen" if chosen > 1 else ""
    if tier == "fallback":
        return f"no rule applied; nearest technique by retrieval: {lead.technique}{more}"
    return (f"{lead.bottleneck} detected; {lead.technique} ranked first "
            f"(priority {lead.priority}, expected gain {lead.expected_gain}x){more}")


def _describe(obs: Mapping[str, Scalar]) -> str:
    """A text for retrieval from the observed code features, when no description was given."""
    flags = [k.replace("_", " ") for k, v in obs.items() if v is True]
    return " ".join(flags) or "gpu kernel optimization"
