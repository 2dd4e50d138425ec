"""Evidence for what a document is about: the node its title names, or the one its sentences keep naming, from the
sentence that best states a claim on it.

A document titled for a node of the graph ("Saturating DRAM bandwidth", "GMEM-bound ...") or that keeps naming one
("runtime autotuning" in a page on GEMM heuristics) is evidence for that node, yet the claim rules may keep nothing on
it: the body says the thing in its own words, or names it only in sentences the scorer finds weak
(eval/ingest/runs/subject-session49.md). The title alone is no evidence (it states nothing); the evidence is the body
sentence that best states a claim about the node:
- a statement that names the node with a claim cue (a definition, cause, remedy or advice, or a figure), nearest by
  meaning to the node's text of those, and no farther from it than the extractor's FAR; else,
- for a node the title names only, a statement of explaining form that names no node of its kind, near the node's text
  by meaning (explained.EXPLAINS) and nearer it than to any other node of its kind. A node the body keeps naming is
  stated by a sentence that names it: by meaning alone, such a document's sentences were found to explain other nodes
  (a timing window read as CUDA graphs).
Either way the sentence must state something (unstated.py: not a pointer, code, a configuration field, a name met in
passing, a figure of merit). A title that names the node in another of its senses (lexicon.OTHER_SENSES: "Sparse matrix
vector multiplication" is no skinny GEMM) names no subject. Only a node none of the document's kept claims speaks of
gets this evidence: one claim, at the default bar.

Which node a document is about was also tried by meaning alone (the node most of its passages rank first, the node
nearest its title's embedding): over the tune material that node was the labelled subject for about one document in
four, and the sentences it chose were mostly about something else; names (the title's, the body's) are kept as the
only sign.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .claims import Claim, EntityRef
from .explained import EXPLAINS, explaining_form
from .lexicon import OTHER_SENSES, Mention
from .linking import EntityLinker
from .relations import ADVICE, CAUSE, DEFINITION, FIGURE, REMEDY, SentenceView
from .statement import similarity_pair
from .unstated import why_unstated

# A node named by this many of the document's sentences, more than any other, is what the document is about (chosen on
# the tune material: 2 and 3 added the same items but one, judged right; eval/ingest/runs/subject-session49.md).
RECURRING = 2
# learned-29: a node this many of the document's sentences name is one of its subjects too, named most or not (2 and 3
# added the same one item on the tune material, judged right: eval/ingest/runs/learned29-session50.md)
RECURRING_ANY = 3
CONFIDENCE = 0.55  # one rule, one confidence: at the default bar, below it where support is weak (support.py)


def title_subjects(title: str, mentions: Callable[[str], list[Mention]]) -> list[Mention]:
    """The Bottlenecks and Techniques a document's title names, not in another of their senses."""
    return [m for m in mentions(title) if m.kind in ("Bottleneck", "Technique")
            and not (m.id in OTHER_SENSES and OTHER_SENSES[m.id].search(title))]


def recurring_subjects(naming: Mapping[str, int], kind_of: Mapping[str, str]) -> list[Mention]:
    """The Bottleneck or Technique the document's sentences name most often, when at least RECURRING of them do, and
    every one at least RECURRING_ANY of them name (learned-29)."""
    counts = {i: n for i, n in naming.items() if kind_of.get(i) in ("Bottleneck", "Technique")}
    top = max(counts.values(), default=0)
    return [Mention(i, kind_of[i], 0, 0, False) for i, n in counts.items()
            if n == top >= RECURRING or n >= RECURRING_ANY]


def states_claim(text: str) -> bool:
    """A sentence with a claim cue: it defines, explains a cause or a remedy, advises, or gives a figure."""
    return any(p.search(text) for p in (DEFINITION, CAUSE, REMEDY, ADVICE, FIGURE))


def unspoken_subjects(title: str, recurring: Sequence[Mention], kept: Sequence[Claim],
                      mentions: Callable[[str], list[Mention]]) -> list[tuple[Mention, bool]]:
    """The nodes the title names and those of `recurring` (recurring_subjects) that no kept claim speaks of, each with
    whether the title names it."""
    spoken = {c.subject.id for c in kept} | {getattr(c.object, "id", None) for c in kept}
    titled = {m.id: m for m in title_subjects(title, mentions)}
    return [(m, m.id in titled) for m in [*titled.values(), *(m for m in recurring if m.id not in titled)]
            if m.id not in spoken]


def subject_evidence(title: str, wanted: Sequence[tuple[Mention, bool]], views: Sequence[SentenceView],
                     linker: EntityLinker, extractor: str, far: float) -> list[Claim]:
    """Evidence for each subject of `wanted` (unspoken_subjects) from the sentence of `views` that best states a claim
    about it; `far`: the cosine below which a sentence is too far by meaning from the node. A sentence that does not
    name the node serves only a node the title names: a name the body repeats is stated by a sentence that names it."""
    views = [v for v in views if v.text.strip() != title.strip() and states_claim(v.text)]
    vectors = linker.embed([v.text for v in views]) if wanted and views else None
    if vectors is None:
        return []
    nodes = linker.node_vectors()
    out = []
    for m, titled in wanted:
        named, unnamed = [], []
        for view, vector in zip(views, vectors):
            similarity, margin = similarity_pair(vector, m.id, nodes, linker.kind_of)
            claim = Claim(EntityRef(m.kind, m.id), "SUPPORTS", None, CONFIDENCE, view.span, extractor,
                          kind="definition" if DEFINITION.search(view.text) else "")
            if why_unstated(claim, view.text, view.named, frozenset(), view.context_text, view.header):
                continue
            if any(n.id == m.id for n in view.named):
                if similarity >= far:
                    named.append((similarity, claim))
            elif titled and not view.of_kind(m.kind) and explaining_form(view.text) and similarity >= EXPLAINS \
                    and margin > 0:
                unnamed.append((similarity, claim))
        best = max(named or unnamed, key=lambda pair: pair[0], default=None)
        if best is not None:
            out.append(best[1])
    return out

