"""What a document names that the graph lacks: candidate Techniques, Bottlenecks and protocol steps.

Candidates are the names a document gives to things: section titles ("Buffer Rotation",
"Pingpong scheduling"), terms it introduces ("we call this method crossover", "Programmatic
Dependent Launch (PDL)") and bold terms. A candidate becomes a proposal when its kind can be
told (a measurement context, a head noun such as "scheduling" or "stall", or remedy language
around it), when no lexicon name or retrieval match says the graph already has it, and when a
sentence of the document states something about it: that sentence is its evidence and its
description. A title whose head noun says nothing of its kind ("CPU Offloading", "MXFP8 Training on B200 GPUs")
names a Technique when a sentence under it opens with that name and a verb of benefit ("regional compilation
significantly reduces the time taken to compile"); the speedups the sentences under the title state for it are its
gains. A table row under a speedup header whose subject cell names a number format or a technique the graph lacks
("| `fp8` | `fp16` | 22.95 | 1.9x |") proposes it, with the row's factor as its gain (learned-20); so does a table of
timings a column of which is the system the title leads with, the baseline's time over its own its gain (learned-22,
tables.timed_gain). What a sentence
recommends using for a benefit is a Technique and what it says is slow or expensive a Bottleneck (learned-21,
claimants.py); a name retrieval finds alike to a technique only by their shared head noun ("Shape Specialization",
"Warp specialization") is not that technique. What a title or a sentence advises using for speed is a Technique, what
it advises against or says can be slow a Bottleneck (learned-24, advice.py), a title's name taken as the sentence under
it writes it ("Use Caching Memory Allocator": "caching allocator"). Proposals carry the nearest existing nodes, for
`kskill skills review`. Under a title that heads a catalogue ("Core design patterns", "Key optimization strategies"),
each list item's label names a technique, the item its definition: evidence for the node the graph has, or a proposal
(learned-27).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from .advice import REASON as ADVICE_REASON, advised_names, advised_title
from .claims import Claim, EntityRef, Span
from .linking import EntityLinker
from .loaders import Document
from .passages import ITEM_LABEL, Passage, is_statement
from .claimants import (PHRASE_WORD, called_names, claims_for, costly_name, defined_name, means_names, spelled_acronyms,
                         subject_name, used_names)
from .relations import APPLY, MEASURE, MEASURE_HEADING, NEGATION as NEGATED, REMEDY, gains_of
from .tables import (cell_index, format_named, last_row_below, reads_whole, speedup_owner, speedups, subject_cell,
                     subject_text, table_row, timed_gain)

SAME_STEP = 0.75  # cosine of a candidate's name and a protocol step's text above which they are one step
MAX_PROPOSALS = 8  # per document: a long guide names many things, the review queue should stay short
MAX_GAINS = 6  # speedups kept for one proposal: a results table repeats its factors
CLAIMED = 0.55  # the score of a name read from what its sentence claims for it (claimants.py)
LISTED = 0.6  # the score of a list item's label under a catalogue's title (learned-27)
# learned-27: a title whose head noun says its section lists methods: "Core Pallas design patterns", "Key Patterns",
# "Key optimization strategies" (not "Best Practices" or "Tips", which list steps and advice in the imperative).
CATALOGUE = re.compile(r"\b(?:patterns|techniques|optimi[sz]ations|strategies|tricks)\W*$", re.I)
# A title that opens with a gerund names an activity, not a list of methods: "Applying patterns" (a technique's head
# noun in -ing is a noun there: "Scheduling Patterns").
GERUND_FIRST = re.compile(r"^\W*([A-Za-z]+ing)\b")
# An imperative opening a label is a step, not a name ("Align data structures", "Prefer 1D indexing"): VERB_FIRST's
# verbs and these, which advice lists open with.
IMPERATIVE = re.compile(r"prefer|align|consider|minimi[sz]e|maximi[sz]e|test|balance|calculate|generate|save|compare|"
                        r"try|increase|decrease|reduce|limit|move|precompute|combine|apply|optimi[sz]e")
# A company is no method: "Apple also reduces the amount of threadgroup memory bandwidth" names no technique "Apple".
VENDOR = re.compile(r"^(?:apple|nvidia|amd|intel|google|microsoft|meta|qualcomm|arm|huawei|amazon|aws|samsung|"
                    r"imagination|broadcom|mediatek|graphcore|cerebras|groq|tenstorrent)$", re.I)
GENERIC = re.compile(
    r"^(?:\d+[.)]?\s*)?(?:introduction|overview|conclusions?|summary|background|references?|usage|installation|"
    r"requirements|prerequisites|getting started|examples?|results?|performance|benchmarks?|acknowledge?ments?|"
    r"(?:table of )?contents|license|news|code walkthrough|tools?|inputs?|outputs?|steps?(?: \d+)?|notes?|"
    r"appendix|copyright|faq|troubleshooting|motivation|outline(?: of talk)?|related work|future work|next steps|"
    r"key decisions|contributing|tests?|demo|api|build|docker|setup|discussion|case study|verification|"
    r"how it works|design|architecture|implementation|methodology|data collection|data analysis|"
    r"testing(?: methodology overview)?|potential next steps|supported .*|pseudo code|programming model|"
    r"challenges?|solution|idea|key (?:idea|ideas|points)|takeaways?|upshot|why .*)$", re.I)
TECHNIQUE_HEADS = re.compile(
    r"\b(?:schedul\w*|packing|pack|fusion|pipelin(?:ing|ed)|tiling|launch\w*|prefetch\w*|quantiz\w*|transpos\w*|"
    r"swizzl\w*|caching|overlap\w*|speciali[sz]ation|reallocation|rotation|decomposition|rasteri[sz]ation|"
    r"splitting|crossover|unrolling|vectori[sz]ation|coalescing|masking|predication|padding|"
    r"shuffle|recomputation|(?:low|reduced|mixed|half|lower)[- ]precision|broadcast\w*|reorder\w*|interleav\w*|"
    r"batching|multicast\w*|split-\w+)\b", re.I)
# A noun phrase ending in a technique's head noun anywhere in a statement: "with Stream-K scheduling", "a GQA packing".
HEADED = re.compile(rf"\b((?:{PHRASE_WORD}\s+){{1,2}}(?:{TECHNIQUE_HEADS.pattern}))", re.I)
HEADED_SCORE = 0.35  # with a remedy's words 0.45: below the default bar
# learned-31: not a bound of arithmetic ("We can also upper-bound with their sum")
BOTTLENECK_HEADS = re.compile(r"(?:\b(?<!upper[- ])(?<!lower[- ])(?:bound|bottleneck|stalls?|contention|overhead|"
                              r"conflicts?|imbalance|pressure|spills?|thrashing|divergence|underutili[sz]ation)\b|"
                              r"(?<!upper)(?<!lower)-bound\b)", re.I)
# A name the text gives explicitly: quoted ("we call this method \"crossover\"") or capitalized
# ("named Programmatic Dependent Launch"); "is named by converting ..." is no name.
NAMED = re.compile(r"\b(?:we call (?:this|it|the) (?:method|technique|approach|trick)?\s*|(?<!re)named\s+|known as\s+|"
                   r"called\s+)(?:[\"“']([^\"”']{3,40})[\"”']|((?-i:[A-Z][\w-]*)(?: (?-i:[A-Z][\w-]*)){0,3}))", re.I)
ACRONYM = re.compile(r"\b((?:[A-Z][a-z]+[- ]){1,4}[A-Z][a-z]+) \(([A-Z]{2,6})\)")
VERB_FIRST = re.compile(r"^(?:\w+ates|\w+izes|\w+ises|eliminates|reduces|saves|uses|makes|allows|avoids|enables|"
                        r"use|make|keep|avoid|set|add|run|check|ensure|see|note|when|how|why|what|define|compile|"
                        r"install|build|verify|choose|configure|create|load|copy|perform|allocate|call|get|write|"
                        r"read|launch|pass|return|store|select|find|enable|disable|tune|profile|measure|understand)$")
BOLD = re.compile(r"\*\*([A-Za-z][\w ./-]{2,40}?):?\*\*")
# A slide bullet or list item that opens with the name of what it describes: "GQA packing: Pack ...".
LEAD = re.compile(r"^(?:\(?\d{1,2}[.)]\s*|[-*•]\s*)?(?!(?:the|a|an|this|that|these|those|we|our|it|its|recall|here|then|now|"
                  r"so|if|when)\b)"
                  r"((?:[A-Za-z0-9][\w-]*\s){0,3}(?:scheduling|packing|pipelining|fusion|tiling|prefetching|"
                  r"quantization|transpose|swizzling|overlapping|specialization|reallocation|rotation|"
                  r"decomposition|rasterization|splitting|unrolling|masking|padding|recomputation))"
                  r"(?::|\s+(?:using|with|via|is|are|of)\b)", re.I)
# A benefit: a verb of gain and, close after it, what is gained ("can provide substantial training speedups",
# "significantly reduces the time taken to compile", "saves memory").
BENEFIT = (r"(?:provides?|gives?|offers?|delivers?|achieves?|enables?|reduces?|saves?|speeds? up|improves?|"
           r"accelerates?|increases?|optimi[sz]es?|cuts?|lowers?|boosts?)(?:\s+[\w-]+){0,3}?\s+(?:speed-?ups?|speed|"
           r"faster|throughput|memory|latency|performance|utili[sz]ation|savings?|time|overhead)\b")
# A head noun naming a setting or a piece of software, not a method: "NCCL flags", "Triton backend".
SETTING_HEADS = re.compile(r"\b(?:flags?|options?|settings?|parameters?|variables?|configurations?|configs?|tools?|"
                           r"librar(?:y|ies)|backends?|apis?|packages?)$", re.I)
PROTOCOL_HEADS = re.compile(r"\b(?:timing|measurements?|warm[- ]?ups?|cool[- ]?downs?|iterations?|repetitions?|fill|rotation|"
                            r"frequenc\w+|power tests?|gaps?|cold|flush\w*)\b", re.I)


@dataclass(frozen=True)
class Candidate:
    name: str
    kind: str
    evidence: Span
    context: str  # the section's text, for retrieval and the kind decision
    score: float
    gains: tuple[tuple[float, Span], ...] = ()  # speedups other sentences under its title state for it
    head_noun_only: bool = False  # named by nothing but a technique's head noun ending a phrase: weak support
    listed: bool = False  # a list item's label under a catalogue's title: evidence for the node, if the graph has it


class ProposalFinder:
    """Finds proposals in a document's passages; `linker` says what already exists."""

    def __init__(self, linker: EntityLinker, extractor: str = "rules"):
        self.linker = linker
        self.extractor = extractor

    def claims(self, doc: Document, passages: Sequence[Passage]) -> list[Claim]:
        sections = _sections(doc, passages)
        found: dict[str, Candidate] = {}
        for (headings, page), body in sections.items():
            below = [(t, span) for (h, _), b in sections.items() if h[:len(headings)] == headings for t, span in b
                     if is_statement(t)]
            for cand in self._candidates(doc, headings, page, body, below):
                key = cand.name.lower()
                held = found.get(key)
                # a catalogue's item keeps its own sentence: the name is its label there
                better = held is None or cand.score > held.score or cand.listed and cand.score >= held.score
                best = cand if better else held
                # one name, one proposal: the speedups its other mentions state are its gains too
                found[key] = best if held is None else replace(best, gains=_merged(held.gains, cand.gains),
                                                                 listed=held.listed or cand.listed)
        named = {key: [m.id for m in self.linker.mentions(c.name) if m.kind == c.kind] for key, c in found.items()}
        candidates = [c for c in found.values() if not named[c.name.lower()]]
        matches = self._matches(candidates)
        fresh = _distinct(sorted((c for c in candidates if not self._exists(c, matches[c.name.lower()])),
                                 key=lambda c: -c.score))
        claims: list[Claim] = []
        for key, cand in found.items():  # learned-27: a catalogue's item the lexicon names is evidence for its node
            if cand.listed and named[key]:  # (retrieval's "same" is too loose for a label: "Constexpr flags ...")
                claims.append(Claim(EntityRef(cand.kind, named[key][0]), "SUPPORTS", None, cand.score, cand.evidence,
                                    self.extractor, kind="definition"))
        for cand in fresh[:MAX_PROPOSALS]:
            claims.extend(self._claims_for(cand, matches[cand.name.lower()]))
        return claims

    def _matches(self, candidates: list[Candidate]) -> dict[str, list[tuple[str, float, bool]]]:
        """For each candidate, the closest existing nodes of its kind: (id, score, same entity), best first.
        One batch of embeddings per kind: a document's candidates cost one model call."""
        out: dict[str, list[tuple[str, float, bool]]] = {c.name.lower(): [] for c in candidates}
        steps = [c for c in candidates if c.kind == "ProtocolStep"]
        if steps:
            texts = [c.name for c in steps]
            vectors = self.linker.embedder.embed(texts) if self.linker.embedder is not None else None
            for cand, scores in zip(steps, self.linker.protocol.scores(vectors, texts)):
                out[cand.name.lower()] = [(i, s, s >= SAME_STEP) for i, s in sorted(scores.items(), key=lambda x: -x[1])]
        retriever = self.linker.retriever
        for kind in ("Technique", "Bottleneck"):
            group = [c for c in candidates if c.kind == kind]
            if retriever is None or not group:
                continue
            # The name alone says whether the node exists; name and quote together find its neighbours.
            texts = [c.name for c in group] + [f"{c.name}. {c.evidence.quote}" for c in group]
            ranked = retriever.search_batch(texts, [kind], k=3)
            for cand, by_name, by_context in zip(group, ranked, ranked[len(group):]):
                same = (bool(by_name) and by_name[0].is_same_entity and by_name[0].id in self.linker.kind_of
                        and not another_of_its_head(cand.name, by_name[0].name))
                near = [h for h in by_context if h.id in self.linker.kind_of and h.is_related]
                out[cand.name.lower()] = ([(by_name[0].id, by_name[0].score, True)] if same else []) + [
                    (h.id, h.score, False) for h in near]
        return out

    # --- candidates -----------------------------------------------------------------------------

    def _candidates(self, doc: Document, headings: tuple[str, ...], page: int, body: list[tuple[str, Span]],
                    below: list[tuple[str, Span]]):
        """`below`: the statements of this section and of the sections under it."""
        context = " ".join(text for text, _ in body)
        yield from self._row_techniques(doc, body)  # a table's rows are no statements, yet state their speedups
        statements = [(t, s) for t, s in body if is_statement(t)]
        if not statements:
            return
        if headings:
            for title, explicit in _title_names(headings[-1]):
                named = list(self._named(title, context, headings, 0.55, statements, explicit=explicit))
                yield from named or self._titled_technique(title, below)
            yield from self._advised_title(headings[-1], context, below)
        for text, span in statements:
            for m in NAMED.finditer(text):  # only a quoted name may take its kind from the text around it
                yield from self._named(m.group(1) or m.group(2), context, headings, 0.65, statements,
                                       explicit=m.group(1) is not None)
            for m in list(ACRONYM.finditer(text)) + list(LEAD.finditer(text)):
                yield from self._named(m.group(1), context, headings, 0.65, statements)
            yield from self._claimed_names(text, span, context, headings, statements, below)
        if headings and CATALOGUE.search(headings[-1]) and not _activity(headings[-1]):
            yield from self._listed(doc, context, headings, body)
        if doc.kind == "markdown":
            for text, span in body:
                start = max(_offset(span) - 4, 0)  # the opening ** sits just before the sentence
                for term in BOLD.findall(doc.raw[start:start + len(text) + 200]):
                    if term.lower().strip(" :") in text.lower():
                        yield from self._named(term, context, headings, 0.5, statements)

    def _listed(self, doc: Document, context: str, headings: tuple[str, ...], body: list[tuple[str, Span]]):
        """The labels of the list items under a catalogue's title, each a Technique (or a protocol step, by its head
        noun), with a statement of the item as its evidence: "- **Online Accumulation:** Combine partial results as
        you go; don't materialize huge intermediate arrays." (learned-27). The item's statement that uses the name is
        its evidence, else the one that states a remedy or a benefit, else its first."""
        items: dict[int, list[tuple[str, Span]]] = {}
        for text, span in body:
            at = _offset(span)
            items.setdefault(doc.text.rfind("\n", 0, at) + 1, []).append((text, span))
        for line, sentences in items.items():
            m = ITEM_LABEL.match(doc.text, line)
            said = [(t, s) for t, s in sentences if is_statement(t)]
            if not m or m.end() > _offset(sentences[0][1]) + len(sentences[0][0]) or not said:
                continue  # no labelled item opens this line, or it states nothing
            name = " ".join(m.group(1).split()).strip(" .:-")
            first = name.split()[0].lower()
            if (not _plausible(name, camel=True) or VERB_FIRST.match(first) or IMPERATIVE.fullmatch(first)
                    or SETTING_HEADS.search(name)):
                continue
            # a label written as code is an argument's name ("``patterns``: a list of ..."), and an item that says
            # nothing past its label defines nothing ("- Saved for backward vs recomputed: {save_vs_recompute}")
            last_text, last_span = sentences[-1]
            said_past_label = doc.text[m.end():_offset(last_span) + len(last_text)]
            if "`" in doc.raw[max(m.start(1) - 2, 0):m.end(1) + 2] or len(said_past_label.split()) < 3:
                continue
            evidence = next((s for s in said if _mentions(s[0], name)), None) or next(
                (s for s in said if REMEDY.search(s[0]) or re.search(BENEFIT, s[0], re.I)), said[0])
            kind = "ProtocolStep" if self._kind(name, context, headings, False) == "ProtocolStep" else "Technique"
            yield Candidate(name, kind, evidence[1], context, LISTED, _gains(name, said), listed=True)

    def _named(self, name: str, context: str, headings: tuple[str, ...], base: float,
               statements: list[tuple[str, Span]], explicit: bool = False, head_noun_only: bool = False):
        name = " ".join(name.split()).strip(" .:-")
        if not _plausible(name):
            return
        kind = self._kind(name, context, headings, explicit)
        if kind is None:
            return
        about = _best_statement(name, statements)
        score = base + (0.1 if REMEDY.search(about[0]) or APPLY.search(about[0]) else 0.0)
        yield Candidate(name, kind, about[1], context, round(score, 2), head_noun_only=head_noun_only)

    def _claimed_names(self, text: str, span: Span, context: str, headings: tuple[str, ...],
                       statements: list[tuple[str, Span]], below: list[tuple[str, Span]]):
        """Names the sentence gives by what it says of them (claimants.py). A name introduced in lower case, or
        spelled out before its acronym, takes its kind from its head noun as a capitalised one does (so does a
        phrase ending in a technique's head noun, whose support is weak: support.py keeps it below the default bar); the means or the subject of a stated benefit or factor, and a name
        defined as a method, and what the sentence recommends using for a benefit (learned-21), are Techniques unless
        their head noun says otherwise, with this sentence as their evidence and the factors the sentences claiming a
        result for them state as their gains; what it says is slow or expensive is a Bottleneck (learned-21)."""
        for name, quoted in called_names(text):
            yield from self._named(name, context, headings, 0.65, statements, explicit=quoted)
        for name in spelled_acronyms(text):
            yield from self._named(name, context, headings, 0.65, statements)
        for m in HEADED.finditer(text):  # weak support (support.py): below the default bar, seen at lower ones
            yield from self._named(m.group(1), context, headings, HEADED_SCORE, statements, head_noun_only=True)
        said = [*means_names(text), subject_name(text), defined_name(text), *used_names(text)]
        for name in filter(None, said):
            name = " ".join(name.split()).strip(" .:-")
            if _plausible(name, camel=True) and not SETTING_HEADS.search(name):
                kind = self._kind(name, context, headings, explicit=False) or "Technique"
                claimed = [(t, s) for t, s in below if claims_for(t, name)]
                yield Candidate(name, kind, span, context, CLAIMED, _gains(name, claimed))
        for name, kind in advised_names(text):  # learned-24: what the sentence advises using or avoiding (advice.py)
            yield from self._advised(name, kind, span, context, below)
        # learned-21: what the sentence says is slow or expensive is a cost, unless its name is a method's
        cost = " ".join(costly_name(text).split()).strip(" .:-")
        if cost and _plausible(cost) and not (SETTING_HEADS.search(cost) or TECHNIQUE_HEADS.search(cost)
                                              or PROTOCOL_HEADS.search(cost)):
            yield Candidate(cost, "Bottleneck", span, context, CLAIMED)

    def _advised_title(self, title: str, context: str, below: list[tuple[str, Span]]):
        """A title that advises using or avoiding something ("Use Caching Memory Allocator", "Avoid triggering
        Hostcalls", learned-24): the first sentence under it that gives a reason of speed or cost is its evidence."""
        advised = advised_title(title, [t for t, _ in below])
        if advised is None:
            return
        name = advised[0]
        # the sentence that uses most of its name, then one that gives a reason; the name as that sentence uses it
        # ("Use Caching Memory Allocator", "Using caching allocator gives ..."), since a proposal's sentence must use
        # its name (support.py)
        def rank(item: tuple[str, Span]) -> tuple[int, bool]:
            return -len(_as_used(name, item[0]).split()), not ADVICE_REASON.search(item[0])
        text, span = sorted(below, key=rank)[0]
        yield from self._advised(_as_used(name, text) or name, advised[1], span, context, below)

    def _advised(self, name: str, kind: str, span: Span, context: str, below: list[tuple[str, Span]]):
        """A name advice gives (advice.py), when it is a plausible name of its kind: no setting ("CuTe DSL Backend"),
        no method's head noun for a cost, and no cost the graph knows as a technique ("Gradient checkpointing slows
        things down", learned-24)."""
        # "single precision training": the technique is the number format, training is where it is used
        name = re.sub(r"\s+(?:training|inference)$", "", " ".join(name.split()).strip(" .:-"), flags=re.I)
        if not _plausible(name) or SETTING_HEADS.search(name):
            return
        if kind == "Bottleneck" and (TECHNIQUE_HEADS.search(name) or PROTOCOL_HEADS.search(name) or any(
                m.kind == "Technique" for m in self.linker.mentions(name))):
            return
        gains = _gains(name, [(t, s) for t, s in below if claims_for(t, name)]) if kind == "Technique" else ()
        yield Candidate(name, kind, span, context, CLAIMED, gains)

    def _row_techniques(self, doc: Document, body: list[tuple[str, Span]]):
        """A table row with a factor under a speedup header, whose subject cell names no node of the graph but a
        number format ("| `fp8` | `fp16` | 22.95 | 1.9x |", "| MXFP8 for Grouped GEMMs only | ... | 1.404x |") or a
        name with a technique's head noun: that format or name is a Technique, the row its evidence and its factors
        its gains. A speedup header that names what was sped up ("MXFP8 speedup vs BF16", "Async TP speedup") names
        the subject instead, a format or nothing (tables.speedup_owner)."""
        for text, span in body:
            yield from self._timed_technique(doc, span)
            row = table_row(doc.text, doc.raw, _offset(span))
            factors = speedups(text, row.headers) if row is not None and reads_whole(row, text) else ()
            if not factors:
                continue
            named = self.linker.mentions(text)
            where = subject_cell(text, row.headers, named)
            if any(m.kind in ("Technique", "Bottleneck") for m in named if cell_index(text, m.start) == where):
                continue  # an existing node's speedup: the claim rules read it
            owner = speedup_owner(row.headers)
            if owner:  # "MXFP8 speedup vs BF16": the format sped up is the header's, whatever the row's subject
                name = format_named(owner)
            else:
                cell = subject_text(text, row.headers, named)
                name = format_named(cell) or (cell if TECHNIQUE_HEADS.search(cell) else "")
            if name and _plausible(name):
                yield Candidate(name, "Technique", span, text, CLAIMED, tuple((g, span) for g in factors))

    def _timed_technique(self, doc: Document, span: Span):
        """A table of timings under the header at `span` whose columns are systems, one of them the document's subject
        as its title names it (tables.timed_gain, learned-22): that subject is a Technique, the table's last row its
        evidence and the baseline's time over its own its gain."""
        below = last_row_below(doc.text, doc.raw, _offset(span))
        timed = timed_gain(below[0], doc.title or "") if below is not None else None
        if timed is None or not _plausible(timed[0], camel=True):
            return
        line = doc.text[below[1]:].split("\n", 1)[0].strip()
        row = Span(line, doc.location(below[1]))
        yield Candidate(timed[0], "Technique", row, line, CLAIMED, ((timed[1], row),))

    def _titled_technique(self, name: str, below: list[tuple[str, Span]]):
        """A title whose head noun says nothing of its kind ("CPU Offloading", "Regional Compilation") names a
        technique when a sentence under it names it and says what it gains: "regional compilation significantly
        reduces the time taken to compile"."""
        # "MXFP8 Training": the technique is the number format, training is where it is used
        name = re.sub(r"\s+(?:training|inference)$", "", " ".join(name.split()).strip(" .:-"), flags=re.I)
        if not _plausible(name) or BOTTLENECK_HEADS.search(name) or SETTING_HEADS.search(name):
            return
        # The name opens the sentence, as its subject, a verb of benefit follows within a few words
        said = re.compile(rf"^\W*(?:[\w-]+\s+){{0,2}}?({re.escape(name)})\b(?:\s+[\w-]+){{0,3}}?\s+{BENEFIT}", re.I)
        for text, span in below:
            found = said.match(text)
            if found and not _proper_name(found.group(1)) and not NEGATED.search(text):
                yield Candidate(name, "Technique", span, text, 0.65, _gains(name, below))
                return

    def _kind(self, name: str, context: str, headings: tuple[str, ...], explicit: bool) -> str | None:
        """What the name names, from its head noun; only a name the text introduces explicitly ("we
        call this method X") may take its kind from remedy language around it."""
        measuring = MEASURE_HEADING.search(" ".join(headings)) or MEASURE.search(context)
        if measuring and (PROTOCOL_HEADS.search(name) or explicit and MEASURE_HEADING.search(" ".join(headings))):
            return "ProtocolStep"
        if BOTTLENECK_HEADS.search(name):
            return "Bottleneck"
        if TECHNIQUE_HEADS.search(name) or (explicit and REMEDY.search(context) and APPLY.search(context)):
            return "Technique"
        return None

    def _exists(self, cand: Candidate, matches: list[tuple[str, float, bool]]) -> bool:
        """The graph already has it: retrieval (or, for protocol steps, the side table) is sure."""
        return bool(matches) and matches[0][2]

    # --- claims -----------------------------------------------------------------------------------

    def _claims_for(self, cand: Candidate, matches: list[tuple[str, float, bool]]) -> list[Claim]:
        nearest = tuple(i for i, _, _ in matches[:3])
        ref = EntityRef(cand.kind, "", cand.name, _description(cand.evidence.quote), nearest=nearest)
        signals = (("head_noun_only", 1.0),) if cand.head_noun_only else ()
        claims = [Claim(ref, "SUPPORTS", None, cand.score, cand.evidence, self.extractor, kind="definition",
                        signals=signals)]
        stated = [(g, cand.evidence) for g in gains_of(cand.evidence.quote)]
        gains = stated + [(g, span) for g, span in cand.gains if g not in {v for v, _ in stated}]
        if cand.kind == "Technique":
            claims += [Claim(ref, "GAIN", None, cand.score, span, self.extractor, gain=g, kind="gain", signals=signals)
                       for g, span in gains]
        if cand.kind == "Technique":
            for m in self.linker.mentions(cand.evidence.quote):
                if m.kind == "Bottleneck" and REMEDY.search(cand.evidence.quote):
                    claims.append(Claim(EntityRef("Bottleneck", m.id), "ADDRESSED_BY", ref, cand.score,
                                        cand.evidence, self.extractor, kind="remedy"))
        return claims


def _sections(doc: Document, passages: Sequence[Passage]) -> dict[tuple[tuple[str, ...], int], list[tuple[str, Span]]]:
    """Sentences grouped by heading path (and page for PDFs), with their evidence spans."""
    out: dict[tuple[tuple[str, ...], int], list[tuple[str, Span]]] = {}
    for p in passages:
        for s in p.sentences:
            out.setdefault((p.headings, p.page), []).append((s.text, Span(s.text, doc.location(s.start))))
    return out


def _title_names(title: str) -> list[tuple[str, bool]]:
    """The names a section title gives, each with whether the title spells it out as a name:
    "Asynchrony: Overlapping GEMM and Softmax" gives both parts, "mma_dkv_is_rs (Register-Source for dKV)"
    the words in parentheses."""
    title = re.sub(r"[,(]?\s*(?:ctd|cont(?:inued|'d)?)\.?\)?\s*$", "", title, flags=re.I)
    glossed = re.search(r"\(([A-Za-z][^()]{2,40})\)\s*$", title)
    if glossed and re.search(r"[_`]", title[:glossed.start()]):
        return [(name, True) for name in [_clean_title(glossed.group(1))] if name]
    parts = [p for p in (part.strip() for part in title.split(":")) if p] if ":" in title else [title]
    return [(name, False) for name in (_clean_title(p) for p in parts) if name]


def another_of_its_head(name: str, node_name: str) -> bool:
    """Whether `name` is another kind of what an existing node's name names, its head noun alone in common (learned-21):
    "Shape Specialization" is no "Warp specialization", though retrieval finds them alike by their shared head. Only a
    technique's head noun names a family whose members its modifiers tell apart ("CUDA graphs" and "Capturing a graph"
    are one thing)."""
    if not TECHNIQUE_HEADS.fullmatch(name.split()[-1]):
        return False
    words, known = _content_words(name), _content_words(node_name)
    head, known_head = _stem(name.split()[-1]), _stem(node_name.split()[-1]) if node_name.split() else ""
    modifiers = {_stem(w) for w in words} - {head}
    return (head == known_head and bool(modifiers) and len(known) > 1
            and not modifiers & {_stem(w) for w in known})


def _stem(word: str) -> str:
    """A word without its plural or verbal ending, for comparing head nouns ("kernels", "specialization")."""
    word = re.sub(r"[^a-z0-9-]", "", word.lower())
    return re.sub(r"(?:ing|s)$", "", word) if len(word) > 4 else word


def _proper_name(words: str) -> bool:
    """Capitals after the first word, as a product is written ("Liger Kernel"); a method is a common noun in a
    sentence ("regional compilation", "MXFP8 training")."""
    return any(w[0].isupper() and not w.isupper() for w in words.split()[1:])


def _gains(name: str, statements: list[tuple[str, Span]]) -> tuple[tuple[float, Span], ...]:
    """The speedups the statements that name `name` state (gains_of, every factor of a sentence), first six, once
    each."""
    return _merged(*(tuple((g, span) for g in gains_of(text)) for text, span in statements if _mentions(text, name)))


def _merged(*groups: tuple[tuple[float, Span], ...]) -> tuple[tuple[float, Span], ...]:
    """Speedups of one name from several candidates, in order, once each, first six."""
    found: dict[float, Span] = {}
    for gains in groups:
        for g, span in gains:
            found.setdefault(g, span)
    return tuple(found.items())[:MAX_GAINS]


def _best_statement(name: str, statements: list[tuple[str, Span]]) -> tuple[str, Span]:
    """The statement that says most about `name`: one naming it, best with a cue or a figure."""
    def rank(item: tuple[str, Span]) -> tuple[int, int]:
        text = item[0]
        return (1 if _mentions(text, name) else 0,
                1 if REMEDY.search(text) or APPLY.search(text) or re.search(r"\d\s*(?:x|%|TFLOPS)", text) else 0)
    return max(statements, key=rank)


def _distinct(candidates: list[Candidate]) -> list[Candidate]:
    """Candidates whose names share most of their words are one: the best scored stays."""
    kept: list[Candidate] = []
    for cand in candidates:
        words = _content_words(cand.name)
        if all(len(words & _content_words(k.name)) < 0.6 * min(len(words), len(_content_words(k.name)))
               for k in kept if k.kind == cand.kind):
            kept.append(cand)
    return kept


def _as_used(name: str, text: str) -> str:
    """How `text` writes `name`: the name itself, or the longest run of its words, head noun last, in any number
    ("caching allocator" for "Caching Memory Allocator", "hostcall" for "Hostcalls"); "" when the text does not.
    Words compare by their stems (_stem)."""
    if name.lower() in text.lower():
        return name
    stems, head = _content_stems(name), _stem(name.split()[-1])
    words = re.findall(r"[\w-]+", text)
    runs = [words[i:j + 1] for j, w in enumerate(words) if _stem(w) == head
            for i in range(j, -1, -1) if all(_stem(v) in stems for v in words[i:j + 1])]
    best = max(runs, key=len) if runs else []
    # the head noun alone is no name of a modified thing: "dtype" is not "the float16 dtype"
    return " ".join(best) if len(best) >= min(2, len(name.split())) else ""


def _content_stems(name: str) -> set[str]:
    return {_stem(w) for w in _content_words(name)}


def _content_words(name: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", name.lower()) if w not in {"of", "and", "the", "with", "for", "in", "a"}}


def _clean_title(title: str) -> str:
    title = re.sub(r"^\s*(?:\d+(?:\.\d+)*[.)]?|[ivx]+\.)\s+", "", title)  # "2.3 Cache hints" -> "Cache hints"
    title = re.sub(r"\s+(?:to the rescue|in \w+(?: \w+)?|for \w+(?: \w+)?|on \w+(?: \w+)?)$", "", title, flags=re.I)
    generic_tail = r"\s+(?:methodology|requirements|guidelines?|overview|basics|details|notes|tips|considerations|" \
                   r"challenges(?: with \w+)?|in practice|explained|benchmarks?|tutorial)$"
    while re.search(generic_tail, title, flags=re.I):
        title = re.sub(generic_tail, "", title, flags=re.I)
    return title.strip(" :")


def _activity(title: str) -> bool:
    """Whether a section title opens with a gerund that is no technique's head noun ("Applying patterns")."""
    m = GERUND_FIRST.match(title)
    return m is not None and not TECHNIQUE_HEADS.fullmatch(m.group(1))


def _plausible(name: str, camel: bool = False) -> bool:
    """A name, not a sentence fragment or an identifier: few words, no code, not a verb first. `camel`: a word in
    camel case that opens with a capital is a product's name ("SageAttention"), not an identifier ("blockDim")."""
    words = name.split()
    if not (1 <= len(words) <= 6 and 3 <= len(name) <= 60) or GENERIC.match(name) or VENDOR.match(name):
        return False
    identifier = r"\b[a-z]\w*[a-z][A-Z]" if camel else r"[a-z][A-Z]"
    # learned-17: a number format's short name ("gf4", "fp8", "nf4") is a name, not a fragment
    if re.search(rf"[_(){{}}\[\]=<>`?*]|\d{{3,}}|{identifier}", name) or not any(
            len(w) > 3 or re.fullmatch(r"[a-z]{2}\d", w, re.I) for w in words):
        return False
    # learned-22: a restriction is a gate, not a name ("Transpose only for 32/64-bit", a bold item of a list of gates)
    if re.search(r"\bonly\s+(?:for|when|if|with|on|in|at)\b", name, re.I):
        return False
    first = words[0].lower()
    return not (VERB_FIRST.match(first) and len(words) > 1)


def _mentions(text: str, name: str) -> bool:
    head = name.split()[0].lower()
    return name.lower() in text.lower() or (len(head) > 4 and head in text.lower())


def _description(quote: str) -> str:
    return quote if len(quote) <= 240 else quote[:237].rstrip() + "..."


def _offset(span: Span) -> int:
    m = re.search(r"offset (\d+)", span.location)
    return int(m.group(1)) if m else 0
