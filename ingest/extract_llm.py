"""The LLM extractor: structured extraction against a JSON schema through the `openai` client.

The document goes out in chunks of sentences; each answer must fit `SCHEMA` (asked for with
`response_format` json_schema, and validated here whatever the server did). A claim survives
only if its quote occurs in the chunk (the evidence is then located exactly) and its
condition names a vocabulary metric: the model proposes, the text and the schema decide.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from kskill.graph_schema.model import Condition, ConditionOp

from .claims import Claim, ClaimKind, EntityRef, Relation, SkillKind, Span, merge_claims
from .errors import ExtractionError
from .loaders import Document
from .segment import Sentence, sentences

log = logging.getLogger(__name__)

CHUNK_CHARS = 6000
MIN_CHUNK_CHARS = 600  # below this a chunk is too short to state a claim with its context


class EntityOut(BaseModel):
    kind: SkillKind
    id: str = Field(description="an id from the known list, or empty for a new entity")
    name: str
    description: str


class ConditionOut(BaseModel):
    metric: str
    op: ConditionOp
    value: str | float | bool | list[str] | None = None


class ClaimOut(BaseModel):
    subject: EntityOut
    relation: Relation
    object: EntityOut | None = None
    condition: ConditionOut | None = None
    gain: float | None = None
    kind: ClaimKind = Field(default="", description="what the quote says: remedy, cause, definition, precondition, "
                                                    "detection, gain or measurement")
    quote: str = Field(description="the exact sentence from the text that states the claim")
    confidence: float = Field(ge=0, le=1)


class Answer(BaseModel):
    claims: list[ClaimOut]


SCHEMA: dict[str, Any] = Answer.model_json_schema()

SYSTEM = """You extract GPU-kernel optimization knowledge from technical text into a knowledge graph.
Relations:
- ADDRESSED_BY: subject is a Bottleneck, object a Technique that fixes, avoids or hides it.
- REQUIRES / FORBIDDEN_WHEN: subject is a Technique, condition a predicate over one metric of the vocabulary.
- CONFLICTS_WITH: two Techniques that cannot be combined.
- DETECTED_BY: subject is a Bottleneck, condition a threshold on one metric that reveals it.
- GAIN: subject is a Technique, gain the speedup factor the text states (2x faster -> 2.0).
- SUPPORTS: the sentence explains one Bottleneck, Technique or ProtocolStep (what it is, what causes it, how
  to measure it); no object. Measurement advice (warm-up, cold L2, clocks, repetitions) supports a ProtocolStep,
  never a Technique.
Use the id of a known entity when the text names it; otherwise leave id empty and give a short name and a
one-sentence description. Quote the sentence that states the claim exactly as written. Only state what the text
says; return {"claims": []} when it says nothing of this kind. Answer with JSON only."""


ANSWER_FAILURES = ("bad_json", "truncated_json", "schema")  # besides the endpoint's own failures


class AnswerError(ExtractionError):
    """The LLM's answer is unusable; `reason` says how: bad_json, truncated_json, schema, or how the
    endpoint failed (timeout, rate_limit, server_error, connection, bad_response, refused)."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


class LLMExtractor:
    """Claims from a document by an LLM. `endpoint` answers `complete(messages, response_format=...)`
    with a reply that has `text` and `truncated` (kskill.agents.brains.ChatEndpoint: the brain's
    call path, with its retries, cache, budget and accounting)."""

    name = "llm"
    version = "llm-2"

    def __init__(self, endpoint: Any, nodes: Iterable[Mapping[str, str]], metrics: Sequence[str],
                 chunk_chars: int = CHUNK_CHARS, prompt_chars: int | None = None):
        self.endpoint = endpoint
        self.nodes = list(nodes)
        self.known = {n["id"]: n["kind"] for n in self.nodes}
        self.metrics = set(metrics)
        self.chunk_chars = chunk_chars
        if prompt_chars is not None:  # a small context: the text gets what the instructions leave
            room = prompt_chars - len(SYSTEM) - len(self._user(""))
            self.chunk_chars = max(MIN_CHUNK_CHARS, min(chunk_chars, room))

    def extract(self, doc: Document) -> list[Claim]:
        claims: list[Claim] = []
        for chunk in _chunks(sentences(doc), self.chunk_chars):
            answer = self._ask(" ".join(s.text for s in chunk))
            claims.extend(c for c in (self._claim(doc, chunk, out) for out in answer.claims) if c is not None)
        return merge_claims(claims)

    def _user(self, text: str) -> str:
        known = "\n".join(f"- {n['kind']} {n['id']}: {n['name']}" for n in self.nodes)
        return f"Known entities:\n{known}\n\nMetric vocabulary: {', '.join(sorted(self.metrics))}\n\nText:\n{text}"

    def _ask(self, text: str) -> Answer:
        user = self._user(text)
        try:
            reply = self.endpoint.complete(
                [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
                response_format={"type": "json_schema", "json_schema": {"name": "claims", "schema": SCHEMA}})
        except Exception as exc:  # the endpoint's errors say how it failed (timeout, rate_limit, refused, ...)
            reason = getattr(exc, "reason", "endpoint_error")
            raise AnswerError(f"the LLM endpoint failed ({reason}): {type(exc).__name__}: {exc}", reason) from exc
        return parse_answer(reply.text, reply.truncated)

    def _claim(self, doc: Document, chunk: list[Sentence], out: ClaimOut) -> Claim | None:
        sentence = _find_quote(chunk, out.quote)
        if sentence is None:
            log.info("dropped an LLM claim whose quote is not in the text: %r", out.quote[:80])
            return None
        span = Span(sentence.text, doc.location(sentence.start))
        subject = self._entity(out.subject)
        obj: EntityRef | Condition | None = None
        if out.relation in ("REQUIRES", "FORBIDDEN_WHEN", "DETECTED_BY"):
            obj = self._condition(out.condition)
            wanted = "Bottleneck" if out.relation == "DETECTED_BY" else "Technique"
            if obj is None or out.subject.kind != wanted:
                return None
        elif out.relation == "GAIN":
            if out.gain is None or out.gain < 1.0 or out.subject.kind != "Technique":
                return None
        elif out.relation == "SUPPORTS":
            obj = None
        else:
            if out.object is None:
                return None
            obj = self._entity(out.object)
            expected = ("Bottleneck", "Technique") if out.relation == "ADDRESSED_BY" else ("Technique", "Technique")
            if (subject.kind, obj.kind) != expected:
                return None
        return Claim(subject, out.relation, obj, round(out.confidence, 2), span, self.name, gain=out.gain,
                     kind=out.kind)

    def _entity(self, out: EntityOut) -> EntityRef:
        known_id = out.id if self.known.get(out.id) == out.kind else ""
        return EntityRef(out.kind, known_id, out.name.strip(), out.description.strip())

    def _condition(self, out: ConditionOut | None) -> Condition | None:
        if out is None or out.metric not in self.metrics:
            return None
        try:
            value = out.value if out.op != "is_true" else None
            return Condition.of(out.metric, out.op, value)
        except ValidationError:
            return None


def _chunks(sents: list[Sentence], limit: int) -> Iterable[list[Sentence]]:
    chunk: list[Sentence] = []
    size = 0
    for s in sents:
        if chunk and size + len(s.text) > limit:
            yield chunk
            chunk, size = [], 0
        chunk.append(s)
        size += len(s.text) + 1
    if chunk:
        yield chunk


def _find_quote(chunk: list[Sentence], quote: str) -> Sentence | None:
    """The sentence holding the quote (whitespace and case aside), or None when the model made it up."""
    wanted = " ".join(quote.split()).lower().strip(" .\"'")
    if len(wanted) < 8:
        return None
    for s in chunk:
        if wanted in s.text.lower() or (len(s.text) >= 8 and s.text.lower().strip(" .") in wanted):
            return s
    return None


def parse_answer(content: str, truncated: bool = False) -> Answer:
    """The claims in a reply, or an ExtractionError that says which way it failed: truncated_json
    (cut off, at its token limit or mid-document), bad_json (prose or other non-JSON) or schema."""
    text = _strip_fences(content)
    try:
        data = json.loads(text)
    except ValueError as exc:
        reason = "truncated_json" if truncated or _cut_off(text, exc) else "bad_json"
        raise AnswerError(f"the LLM's answer is not whole JSON ({reason}): {exc}; it began {content[:80]!r}",
                          reason) from exc
    try:
        return Answer.model_validate(data)
    except ValidationError as exc:
        raise AnswerError(f"the LLM's answer does not fit the claim schema (schema): {str(exc)[:300]}",
                          "schema") from exc


def _cut_off(text: str, exc: ValueError) -> bool:
    """Whether `text` reads as the start of a JSON document that stops early (not prose, not bad syntax)."""
    if not isinstance(exc, json.JSONDecodeError) or not text.lstrip().startswith(("{", "[")):
        return False
    return exc.msg.startswith("Unterminated string") or exc.pos >= len(text.rstrip())


def _strip_fences(content: str) -> str:
    text = content.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text
