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


def openai_client(base_url: str, api_key: str):
    """An OpenAI-compatible client; imported lazily so the rule path never needs it."""
    try:
        from openai import OpenAI
    except ImportError as exc:
        raise ExtractionError("the openai package is missing: pip install openai") from exc
    return OpenAI(base_url=base_url or None, api_key=api_key or "not-needed")


class LLMExtractor:
    """Claims from a document by an LLM; `client` is an `openai.OpenAI` or anything with its chat API."""

    name = "llm"
    version = "llm-2"

    def __init__(self, client: Any, model: str, nodes: Iterable[Mapping[str, str]], metrics: Sequence[str],
                 chunk_chars: int = CHUNK_CHARS):
        self.client = client
        self.model = model
        self.nodes = list(nodes)
        self.known = {n["id"]: n["kind"] for n in self.nodes}
        self.metrics = set(metrics)
        self.chunk_chars = chunk_chars

    def extract(self, doc: Document) -> list[Claim]:
        claims: list[Claim] = []
        for chunk in _chunks(sentences(doc), self.chunk_chars):
            answer = self._ask(" ".join(s.text for s in chunk))
            claims.extend(c for c in (self._claim(doc, chunk, out) for out in answer.claims) if c is not None)
        return merge_claims(claims)

    def _ask(self, text: str) -> Answer:
        known = "\n".join(f"- {n['kind']} {n['id']}: {n['name']}" for n in self.nodes)
        user = (f"Known entities:\n{known}\n\nMetric vocabulary: {', '.join(sorted(self.metrics))}\n\n"
                f"Text:\n{text}")
        try:
            response = self.client.chat.completions.create(
                model=self.model, temperature=0,
                messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
                response_format={"type": "json_schema",
                                 "json_schema": {"name": "claims", "schema": SCHEMA}},
            )
            content = response.choices[0].message.content or ""
        except Exception as exc:  # the client raises its own hierarchy; all mean "the endpoint failed"
            raise ExtractionError(f"the LLM endpoint failed: {type(exc).__name__}: {exc}") from exc
        try:
            return Answer.model_validate(json.loads(_strip_fences(content)))
        except (ValueError, ValidationError) as exc:
            raise ExtractionError(f"the LLM's answer does not fit the claim schema: {str(exc)[:300]}") from exc

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


def _strip_fences(content: str) -> str:
    text = content.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text
