"""Typed nodes and relationships of the kskill graph (ARCHITECTURE 3.2 and 3.3).

Every node kind has a pydantic model validated before it is written; every relationship
kind is listed in RELATIONSHIPS with the labels it may join. Property values are kept to
what both FalkorDB and Neo4j store: strings, numbers, booleans and lists of those.
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.:\-]*$")
Status = Literal["accepted", "proposed", "rejected"]
Scalar = str | int | float | bool


def stable_id(prefix: str, *parts: Any) -> str:
    """A short content-derived id: the same parts always give the same id."""
    text = json.dumps(parts, sort_keys=True, default=str)
    return f"{prefix}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"


class Node(BaseModel):
    """Base of all node kinds: a stable id and the label it is stored under."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    label: ClassVar[str] = ""

    id: str
    origin: str = ""  # "builtin", or what wrote the node: "ingest", "run"
    created_at: str = ""  # set by the store on creation

    @field_validator("id")
    @classmethod
    def _id_is_stable(cls, value: str) -> str:
        if not ID_PATTERN.match(value):
            raise ValueError(f"id {value!r} must be lower-case letters, digits and _ . : -")
        return value

    def properties(self) -> dict[str, Any]:
        """The properties as stored: None and empty strings dropped (neither engine stores null)."""
        return {k: v for k, v in self.model_dump().items() if v is not None and v != ""}


# --- long-term memory -------------------------------------------------------------------

MetricSource = Literal["ncu", "torch_profiler", "static", "problem", "derived"]
MetricType = Literal["number", "bool", "string"]
ConditionOp = Literal["<", "<=", ">", ">=", "==", "!=", "in", "is_true"]


class Metric(Node):
    """One name in the observation vocabulary."""

    label: ClassVar[str] = "Metric"
    name: str
    description: str
    unit: str = ""
    source: MetricSource
    type: MetricType = "number"
    ncu_names: list[str] = Field(default_factory=list)  # raw Nsight Compute names that map here


# The comparisons a condition's operator names (`in` and `is_true` aside).
COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
           "!=": operator.ne}


class Condition(Node):
    """A machine-evaluable predicate over one metric; its id is derived from its content.

    `in` keeps its list in `values` and every other operator its operand in `value`, so that a
    query can evaluate any condition without comparing a scalar with a list. A condition ingest
    read from a requirement clause that no metric states ("the last dimension must be divisible
    by 128") is `proposed`: it has no metric, only its text, until a reviewer maps it to one.
    """

    label: ClassVar[str] = "Condition"
    metric: str
    op: ConditionOp
    value: Scalar | None = None
    values: list[Scalar] | None = None
    text: str = ""  # human-readable form, filled in by `of`
    status: Status = "accepted"

    @model_validator(mode="after")
    def _operand_fits_op(self) -> Condition:
        if self.op == "in":
            if not self.values or self.value is not None:
                raise ValueError("'in' needs a non-empty list of values")
        elif self.values is not None:
            raise ValueError(f"{self.op!r} takes no list")
        elif self.op == "is_true" and self.value is not None:
            raise ValueError("is_true takes no value")
        elif self.op != "is_true" and self.value is None:
            raise ValueError(f"{self.op!r} needs a value")
        return self

    @classmethod
    def of(cls, metric: str, op: str, value: Any = None) -> Condition:
        text = f"{metric} is true" if op == "is_true" else f"{metric} {op} {value!r}"
        operand = {"values": value} if op == "in" else {"value": value}
        return cls(id=stable_id("cond", metric, op, value), metric=metric, op=op, text=text, **operand)

    def holds(self, seen: Any) -> bool | None:
        """This condition over an observed value, as the Planner's query evaluates it (planner_queries._verdict);
        None when the value was not observed or cannot be compared."""
        if seen is None or not self.metric:
            return None
        if self.op == "is_true":
            return seen is True
        if self.op == "in":
            return seen in (self.values or [])
        try:
            return bool(COMPARE[self.op](seen, self.value))
        except TypeError:
            return None

    @classmethod
    def proposed(cls, text: str) -> Condition:
        """A condition named by its clause only, for review: no metric evaluates it."""
        return cls(id=stable_id("cond", "proposed", text.lower()), metric="", op="is_true", text=text,
                   status="proposed")


class Bottleneck(Node):
    label: ClassVar[str] = "Bottleneck"
    name: str
    description: str
    status: Status = "accepted"


class Technique(Node):
    label: ClassVar[str] = "Technique"
    name: str
    description: str
    playbook: str = ""
    recipe: str = ""  # key of the recipe brain's implementation; empty when it has none
    status: Status = "accepted"


class Variant(Node):
    """One form of a technique (a GEMM's dot precision, tile sizes): params the brain applies, guarded
    by Conditions of its own (REQUIRES, FORBIDDEN_WHEN) on top of the technique's."""

    label: ClassVar[str] = "Variant"
    name: str
    description: str
    params: str = "{}"  # JSON text (sorted keys) of the brain parameters this form sets
    priority: int = Field(50, ge=0, le=100)  # orders the forms of one technique, highest first
    status: Status = "accepted"

    @field_validator("params")
    @classmethod
    def _params_are_an_object(cls, value: str) -> str:
        try:
            parsed = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"params must be JSON text: {exc}") from exc
        if not isinstance(parsed, dict):
            raise ValueError("params must be a JSON object")
        return json.dumps(parsed, sort_keys=True)

    def param_values(self) -> dict[str, Any]:
        return json.loads(self.params)


class ProtocolStep(Node):
    """One step of the Reviewer's measurement protocol (warm-up, cold L2, clocks, ...): measurement
    advice that documents give lands here, never among the kernel optimizations."""

    label: ClassVar[str] = "ProtocolStep"
    name: str
    description: str
    practice: str = ""  # how kskill's Reviewer carries the step out
    status: Status = "accepted"


FailureClass = Literal["compile", "runtime", "numeric", "timeout", "cheating", "memory", "other"]


class FailurePattern(Node):
    label: ClassVar[str] = "FailurePattern"
    name: str
    description: str
    failure_class: FailureClass
    patterns: list[str] = Field(default_factory=list)  # regular expressions over the error log
    remedy: str
    status: Status = "accepted"


SourceKind = Literal["paper", "slides", "guide", "note", "corpus", "builtin", "documentation"]


class Source(Node):
    label: ClassVar[str] = "Source"
    kind: SourceKind
    title: str
    uri: str = ""
    citation: str = ""
    authors: str = ""
    content_hash: str = ""
    extractor: str = ""  # name and version of the extractor that read it (ingested sources)


class Evidence(Node):
    label: ClassVar[str] = "Evidence"
    quote: str
    location: str = ""  # "p. 4", "offset 1200", "section Coalescing"
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    claim: str = ""  # what the quote says: remedy, cause, definition, precondition, detection, gain, measurement
    figures: list[str] = Field(default_factory=list)  # numbers the quote states ("up to 32x", "228 KB")
    gain: float | None = None  # a speedup factor the quote states


# --- short-term memory --------------------------------------------------------------------


class Run(Node):
    label: ClassVar[str] = "Run"
    problem: str
    gpu: str = ""
    config: str = ""  # JSON text of the run's settings
    status: str = "running"
    started_at: str = ""
    finished_at: str = ""


class Attempt(Node):
    label: ClassVar[str] = "Attempt"
    run_id: str
    n: int
    kind: Literal["seed", "optimize", "repair", "reference"]
    code_hash: str
    status: str
    runtime_ms: float | None = None
    speedup: float | None = None
    confirmed_speedup: float | None = None  # re-timed against the reference at the end of the run
    correct: bool | None = None
    params: str = ""  # JSON text of the recipe parameters
    variant: str = ""  # the Variant of the applied technique, when the plan named one


class Decision(Node):
    label: ClassVar[str] = "Decision"
    tier: str  # "rule" when conditions matched, "fallback" when retrieval chose
    case: str  # one line saying why


class Observation(Node):
    label: ClassVar[str] = "Observation"
    metric: str
    value: Scalar | None = None
    available: bool = True
    derivation: str = ""  # how a derived value was obtained ("flops / bytes_moved of the reference")
    reason: str = ""  # why an unavailable metric has no value


class Failure(Node):
    label: ClassVar[str] = "Failure"
    failure_class: str
    message: str


class Migration(Node):
    label: ClassVar[str] = "Migration"
    applied_at: str = ""


class SkillBase(Node):
    label: ClassVar[str] = "SkillBase"
    version: str
    content_hash: str
    loaded_at: str = ""


NODE_TYPES: dict[str, type[Node]] = {
    cls.label: cls
    for cls in (
        Metric, Condition, Bottleneck, Technique, Variant, ProtocolStep, FailurePattern, Source, Evidence,
        Run, Attempt, Decision, Observation, Failure, Migration, SkillBase,
    )
}

# relationship type -> the (start label, end label) pairs it may join
RELATIONSHIPS: dict[str, set[tuple[str, str]]] = {
    "DETECTED_BY": {("Bottleneck", "Condition")},
    "ADDRESSED_BY": {("Bottleneck", "Technique")},
    "REQUIRES": {("Technique", "Condition"), ("Variant", "Condition")},
    "FORBIDDEN_WHEN": {("Technique", "Condition"), ("Variant", "Condition")},
    "HAS_VARIANT": {("Technique", "Variant")},
    "CONFLICTS_WITH": {("Technique", "Technique")},
    "REMEDIED_BY": {("FailurePattern", "Technique")},
    "MEASURED_BY": {("Condition", "Metric")},
    "SUPPORTED_BY": {(k, "Evidence") for k in ("Bottleneck", "Technique", "Variant", "ProtocolStep", "FailurePattern",
                                                "Condition", "Metric")},
    "FROM": {("Evidence", "Source")},
    "HAS_ATTEMPT": {("Run", "Attempt")},
    "DERIVED_FROM": {("Attempt", "Attempt")},
    "APPLIED": {("Attempt", "Technique")},
    "DECIDED_BY": {("Attempt", "Decision")},
    "OBSERVED": {("Decision", "Observation")},
    "MATCHED": {("Decision", "Bottleneck"), ("Decision", "Condition")},
    "SELECTED": {("Decision", "Technique")},
    "REJECTED": {("Decision", "Technique")},
    "GENERATED": {("Decision", "Variant")},  # a child was written with this variant
    "RULED_OUT": {("Decision", "Variant")},  # with the reason: a guard, the tabu, or the brain
    "FAILED_WITH": {("Attempt", "Failure")},
    "MATCHES": {("Failure", "FailurePattern")},
}


class AddressedBy(BaseModel):
    """Properties of a Bottleneck -> Technique edge, including what use has taught."""

    model_config = ConfigDict(extra="forbid")
    priority: int = Field(ge=0, le=100)
    expected_gain: float = Field(ge=1.0)  # a speedup factor, 1.0 means none expected
    trials: int = 0
    successes: int = 0
    mean_gain: float = 1.0
