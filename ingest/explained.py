"""Evidence by meaning: a sentence that explains, in its own words, the node its passage is about.

The claim rules read a sentence through the nodes it or its headings name. A sentence that explains a node without its
name ("Tiles of A and B are loaded into these shared memory buffers for faster access" in a section on tiling, "warp
reduction allows each thread to read another thread's register in one cycle via a dedicated shuffle network") gives
them nothing. This rule reads such a sentence when three things agree:
- the passage is about the node by meaning: the node ranks first among the Bottlenecks and Techniques the retriever
  finds for the passage (linking.PassageLinks);
- the sentence itself is nearer by meaning to that node's text than to any other node of its kind, and near enough
  (EXPLAINS, the cosine of the sentence and the node's name and description; EXPLAINS_UNNAMED, higher, when no
  sentence of the document names the node: then nothing but the ranking says the document is about it);
- the sentence explains: a definitional, causal or remedial form (relations.DEFINITION, CAUSE, REMEDY).
A sentence that only mentions a related word is near neither the node's description nor nearer to it than to
its neighbours. A sentence that names a node itself is left to the claim rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .claims import Claim, EntityRef
from .linking import EntityLinker
from .relations import CAUSE, DEFINITION, REMEDY, SentenceView
from .statement import similarity_pair

# Cosine of a sentence and its node's name and description above which the sentence explains the node. Chosen on the
# tune material (eval/ingest/runs/recall-rules-session35b.md).
EXPLAINS = 0.55
# A node no other sentence of the document names needs a sentence nearer its text: the passage's ranking alone is then
# the only sign that the document is about it (chosen on the same material).
EXPLAINS_UNNAMED = 0.67
CONFIDENCE = 0.55  # one rule, one confidence: at the default bar, below it where support is weak (support.py)


def explaining(view: SentenceView, kind_of: Mapping[str, str]) -> str | None:
    """The node the sentence may explain without naming it: its passage's first node by meaning, when neither the
    sentence nor a heading names a node of that kind and the sentence has an explaining form."""
    if not explaining_form(view.text):
        return None
    ranked = sorted(view.about.meaning.items(), key=lambda item: -item[1])
    if not ranked:
        return None
    node_id = ranked[0][0]
    kind = kind_of.get(node_id)
    if kind not in ("Bottleneck", "Technique") or view.of_kind(kind) or view.from_heading(kind) is not None:
        return None
    return node_id


def explaining_form(text: str) -> bool:
    """A sentence of explaining form: a definition, a cause or a remedy (relations.DEFINITION, CAUSE, REMEDY)."""
    return any(p.search(text) for p in (DEFINITION, CAUSE, REMEDY))


def explained(views: Sequence[tuple[SentenceView, str]], linker: EntityLinker,
              extractor: str, named: Mapping[str, int]) -> list[tuple[SentenceView, Claim]]:
    """Evidence for each (sentence, node) pair whose sentence is near the node's text and nearest it of its kind, with
    the sentence's view; `named`: how many sentences of the document name each node."""
    vectors = linker.embed([view.text for view, _ in views]) if views else None
    if vectors is None:
        return []
    nodes = linker.node_vectors()
    out = []
    for (view, node_id), vector in zip(views, vectors):
        similarity, margin = similarity_pair(vector, node_id, nodes, linker.kind_of)
        bar = EXPLAINS if named.get(node_id, 0) > 0 else EXPLAINS_UNNAMED
        if similarity >= bar and margin > 0:
            kind = "definition" if DEFINITION.search(view.text) else ""
            out.append((view, Claim(EntityRef(linker.kind_of[node_id], node_id), "SUPPORTS", None, CONFIDENCE,
                                    view.span, extractor, kind=kind)))
    return out

