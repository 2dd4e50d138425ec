"""The offline extractor: passages linked to the graph by names and meaning, candidate claims decided from
what each sentence says about the nodes it links, a learned scorer that keeps the likely ones, and
proposals for what the graph lacks.

For each passage (sentences under one heading path, on one page): the linker says which nodes the
passage is about by meaning; for each sentence, the lexicon says which nodes it names, and the
sentence is seen with its headings' and previous sentence's nodes (`relations.SentenceView`). The
claim rules score remedies, causes, preconditions, detection thresholds, gains, measurement advice
and plain evidence; the proposal finder adds new Techniques, Bottlenecks and protocol steps. What the
rules keep at their own bars is kept, as the `rules-5` extractor does. The rules then propose again with
low bars, and what that adds (nodes met by meaning or by heading, weaker cues) is kept when the scorer
fitted on the tune documents (scorer.py) says it is likely: leave-one-document-out showed that the
scorer finds more in those weak candidates than the bars do, while it judges the rules' own claims no
better than the bars (eval/ingest_train.py). Claims below the minimum confidence are dropped. Last, the
precision model (precision.py), fitted on sentences a person judged, can drop a kept claim whose sentence
it finds unlikely to state it (`precision-36`; off by default, see RuleSettings), and the sense check (sense.py)
one whose sentence seems to use its node's name in another sense (`sense-36`; off by default); the rest are merged per
triple. Without the scorer's weights the rules decide alone (`rules-36`); the default is the scorer's choice
(`learned-36`). Before any of that, a claim whose sentence does not state it is dropped (unstated.py: a pointer,
code, a configuration field, a name met in passing or in another sense, a figure of merit, a remedy whose technique
only the document's title names, evidence for a protocol step where nothing is measured), and so is a claim on an
existing node whose sentence is far by meaning from that node's text (FAR): on documents nobody had tuned on (heldout6),
those were names met in another sense and relations read from passages that only mention their entities. With the
scorer, a claim whose support is weak (support.py: a caption, a table row, a formula, a dated news line, a proposal its
sentence does not name) keeps a confidence below the default bar (learned-6). learned-7 reads more
(eval/ingest/runs/recall-rules-session35.md): the word "pipeline" names software pipelining only beside that sense's
vocabulary (lexicon.NEEDS_CONTEXT); a title's name is a technique when a sentence under it opens with the name and a
verb of benefit, with the speedups stated for it (proposals.py); a speedup in a sentence naming no technique is the
gain of the technique its nearest heading names, a percentage is read whole ("22.9% speedup"), and a section title
stating a speedup gives it to the technique it or an enclosing title names (relations.py); a name whose head is
"measurement" in a measurement context is a protocol step; "launch-bound" names launch overhead as "memory-bound" names
bandwidth; a bottleneck named as the contrast ("and not compute bound") states nothing about it (unstated.py); a
speedup a new technique of the document claims is not also given to a known technique its sentence names as the means.
learned-8 (eval/ingest/runs/recall-rules-session35b.md) adds evidence by meaning (explained.py): a sentence of explaining
form that names no node of the kind its passage is about, nearest by meaning to that passage's first node, is evidence
for it; and a requirement clause no metric states (requirements.py: "token group sizes must be multiples of 32", "layers
too small to benefit from float8"), about a technique the document proposes, is a REQUIRES or FORBIDDEN_WHEN edge to a
proposed Condition named by the clause. learned-9 (eval/ingest/runs/precision-rules-session35c.md) drops
evidence for a protocol step whose sentence tells no measuring rule (what a tool or a third person can do, a build's
time), "ALU pipeline" and other hardware units' pipelines as software pipelining (lexicon.OTHER_SENSES), a lead line
that points ahead or is a title-case heading, advice in the imperative proposed as a node, and evidence or a speedup
for a technique named inside the baseline of a comparison ("compared to ... using cuBLAS, we improve 1.5x").
learned-10 (eval/ingest/runs/candidates-session40.md) proposes more: every factor a sentence states is a gain
(relations.gains_of: "1.2x-1.4x ... and 2.4x-3.5x", "5-9x", "2.1-fold"), and names a sentence gives by what it says of
them are proposals (claimants.py): introduced in lower case ("known as loop tiling"), spelled out before an acronym,
the means or the subject of a stated benefit or factor ("by utilizing Matrix Cores", "QServe achieves 1.2x-1.4x higher
throughput"), defined as a kind of method, and (weak, for the scorer) a phrase ending in a technique's head noun.
learned-11 (eval/ingest/runs/candidates-session41.md) reads measurement advice in lists: an imperative whose only verb
opens the line with a capital is a statement ("1. Run a few warmup iterations ..."), a list's lead line ending in a
colon is each item's context as a heading is ("For stable and reliable performance measurements:"), and a pointer
inside a bracketed aside does not make its sentence a pointer.
learned-12 (eval/ingest/runs/candidates-session42.md) reads mentions that state nothing more strictly, for precision on
documents never seen: "see X" opening a clause is a cross-reference; a sentence saying what an example or a sample is
states nothing of the node it names; a technique or bottleneck named as what is not used or not available, as the other
side of an analogy ("in the spirit of FlashAttention") or in a table cell past the row's subject is no evidence;
"intrinsics" name fast math intrinsics only beside math words; a protocol step met by meaning needs a sentence that tells
a measuring rule; and a proposal named by a category in the plural ("two timing methods"), a tool ("SHARK Tuner") or a
product's brand case ("xFormers") names no technique.
learned-13 (eval/ingest/runs/candidates-session43.md) reads a markdown table's rows as statements (tables.py): a row
whose subject cell names a technique or bottleneck, with a figure under a header naming a measure ("| Naive Coalesced
Write | 3.12054 | 640.915 |" under "| Kernel Name | Latency (ms) | Effective Bandwidth (GB/s) |"), is seen as a
sentence is, its figures recorded; the subject cell is the first, or a column whose header says it describes the row
when the first cell is a mere label ("Custom GEMM Kernel V01 | 1.7218 | Coalesced global memory access").
learned-14 (eval/ingest/runs/candidates-session44.md) refits the scorer on the whole tune material (271 documents where
learned-1 had 41) and reads a measuring instruction as no evidence for the kernels it measures (unstated.py).
learned-15 (the same report) reads no remedy where the bottleneck and the technique are items of one series ("It does
not measure latency, occupancy, ..., memory coalescing, bank conflicts"), a news line dated day or month first as
weak support (support.py), and three more phrases of the lexicon ("exhaustive tuning", "the overheads of Python").
learned-16 (eval/ingest/runs/candidates-session45.md) reads what is planned as unstated ("For future work, SplitK ...
is a potential speed up we'll investigate") and four more other senses (lexicon.OTHER_SENSES): latency-bound serving,
zero padding, a persistent kernel cache, unified memory's prefetching.
learned-17 (the same report) ends a proposal's name at a lower-case adverb ("Using gf4 currently carries ..." names
gf4, claimants.ADVERB), takes a number format's three-letter name ("gf4", "fp8") as a name (proposals._plausible), and
reads a contributor's instruction ("To add a new fused kernel, ... add two Python files") as no evidence (unstated.py).
learned-18 (eval/ingest/runs/candidates-session46.md) names more nodes said in other words (lexicon.ALIASES): tensor cores
put to use or not ("Use tensor cores (WMMA)", "cannot utilize the Tensor Cores"), tuning said plainly ("pre-tuned",
"find the best kernel configuration"), the first runs set aside ("ignore the first few iterations"), clocks fixed or
unlocked, work done in a single kernel, per-op overhead, shared memory used to reuse data; and reads as no remedy an
improvement "still under progress", a bottleneck named as the technique's own ("the low tensor core utilization of
Flash Attention") and an item of a list of examples ("Example scenarios:") (unstated.py).
learned-19 (the same report) names more (lexicon.ALIASES): the GEMM tutorials' names for vector access ("Vectorized Mem
Access"), tile orders ("Reorders the program IDs ... for improved L2") and tiling levels ("2D block tiling and 2D thread
tiling", "Warptiling"), split-KV, filling the GPU, run-to-run variation; keeps a table row's claim on the node its cells
name and measure although far by meaning (its few words are far from any node's text: far_by_meaning), and reads a
table row as no evidence for a node it does not name, its heading's (unstated.py).
learned-20 (eval/ingest/runs/tables-session46.md) reads the speedups a table states per change or configuration: a
factor under a header naming a speedup ("| `fp8` | `fp16` | 22.95 | 1.9x |" under "Speedup vs `fp16`") is the gain of
the technique the row's subject cell names (relations.ClaimRules._gains), or of the number format or technique the
graph lacks that it names, proposed (proposals.ProposalFinder._row_techniques); a separator of one hyphen a cell
(`|- |- |`) opens a table too (tables.SEPARATOR).
learned-21 (eval/ingest/runs/prose-gains-session47.md) reads the speedups a text states in prose beside its figures
(relations.gains_of): a percentage a verb of speed takes ("improved 16384 by 5.70%", "can run faster by 2%",
"outperform ... by up to 40%", "+50.06% geomean") is the factor 1 + p/100, a percentage cut of a time ("reduces the
step time by 50%") the factor 1 / (1 - p/100), a factor said with "times" or in words ("7 times faster", "five times
faster", "twice as fast") a factor, and two timings of one piece of work ("goes from 260 µs to 70 µs", "50 µs ... but
only 16 µs") the first over the second when the time falls; a percentage under a speedup header in a table ("+20.0%",
"41.2%") is read as 1 + p/100 (tables.speedups); and a sentence opening "For example" that names no technique gives
its speedup to the one technique the sentence before it names (relations.ClaimRules._gains).
It also (eval/ingest/runs/proposals-session47.md; the two rounds were measured apart and merged, session 47) proposes
more of what the graph lacks, read from prose (claimants.py): what a sentence recommends using for a benefit or
against a cost it opens with ("To mitigate the cost you can use FastDivmod to pre-calculate ...", "we introduce FP16
accumulation when applicable for higher throughputs"; not what it says is not used) is a Technique; what a sentence
opens by saying is slow or expensive ("However, integer division is quite slow", "Instantiating a graph is relatively
expensive") is a Bottleneck; and a name that retrieval finds alike to an existing technique only by their shared head
noun, its modifiers different ("Shape Specialization" and "Warp specialization"), is not that technique
(proposals.another_of_its_head); a definition may put the name's acronym before its verb ("SmoothQuant (SQ) is a
quantization algorithm").
learned-22 (eval/ingest/runs/timing-gains-session47.md) reads a percentage before a noun of gain ("provides a 4.4%
performance increase", "a 12% throughput improvement") as the factor 1 + p/100 (relations.GAIN), credited to what a
switch opening the sentence goes to ("changing to use specialization constants provides ...", claimants.SWITCHED),
proposed when the graph lacks it; and a table of timings whose columns are systems compared, one of them the name the
document's title leads with ("ByteTransformer" under "ByteTransformer: Optimized BERT ..."), where the caption or a
header says the figures are times ("execution time in millisecond"): that system's gain is the first other column's
time over its own in the table's last row, the largest size of its sweep (tables.timed_gain), proposed when the graph
lacks it (proposals.ProposalFinder._timed_technique).
It also (eval/ingest/runs/imperatives-session47.md; the two rounds were measured apart and merged, session 47) reads
gates stated as a hindrance (requirements.gate_claims): what a sentence says does not work inside, cannot be used
during, is not allowed in, cannot benefit from, or limits, prevents or reduces the potential of a technique it names
as the whole object ("NVTX markers do not work inside of CUDA Graphs", "multiple compute-bound operations in a
sequence can reduce fusion potential") is a proposed Condition the technique is FORBIDDEN_WHEN; behind a pronoun, the
thing an opening "Avoid ..." advises against ("Avoid creating tensors with odd shapes, as these may limit
vectorization"); and a restriction ("Transpose only for 32/64-bit") is no proposal's name.
learned-23 (eval/ingest/runs/vocabulary-session48.md) names the base's nodes in the words of other programming models,
taken from their own documentation (lexicon.py: HIP's LDS and wavefronts, SYCL's shared local memory and work-items,
Metal's threadgroup memory and SIMD-groups, Vulkan's subgroup operations, XMX and MFMA units, VGPR usage, dispatch
overhead, timestamp queries, @fastmath, ...); OpenCL's "local memory" is shared memory only where the sentence speaks
OpenCL or SYCL (lexicon.NEEDS_CONTEXT), since in CUDA it is a thread's spill space.
learned-24 (eval/ingest/runs/advice-session48.md) proposes what a practitioner's advice names (advice.py): what a title
or a sentence advises using, with a reason of speed or cost, is a Technique ("Use Caching Memory Allocator", "Try to
use single precision training when possible, because most GPUs have poor double-precision performance"), what it
advises against or says can be slow a Bottleneck ("Avoid triggering Hostcalls", "the code generator will emit atomic
operations, which can be very slow"); a title's name is taken as the sentence under it writes it ("caching
allocator"), and a plain "Use X" (mostly a tool for a step), a version, a setup step, advice with no reason of speed or
cost, or a cost a stated benefit outweighs is no proposal.
learned-25 (eval/ingest/runs/subject-session49.md) gives a document evidence for what it is about (subject.py): the node
its title names, or the Bottleneck or Technique its sentences name most (at least twice), when no kept claim speaks of
it, takes as evidence the body sentence that names it and states a claim (a cue or a figure; not the title, not a
mention in passing), nearest by meaning to the node's text; a node only the title names may take a sentence that
explains it unnamed, as explained.py reads them. "DRAM-bound", "HBM-bound" and "GMEM-bound" name memory_bandwidth as
"memory-bound" does (lexicon.ALIASES). And a remedy whose bottleneck only the document's title names is no remedy, as
one whose technique only the title names was not (_stated).
learned-26 reads the same claims from cleaner text (loaders.py): a Markdown file's HTML comments are blanked, so a
licence header kept in one ("<!-- # Copyright ... -->") makes no heading, no title and no passage, and a heading's
inline tags ("<ins>Section 4c</ins>") are no part of its title; and an object pronoun ("you can use them to improve
...") names nothing (claimants.OPENERS), as a subject pronoun did not (all three seen in heldout28's run, session 49).
learned-27 (eval/ingest/runs/catalogue-session50.md) reads a catalogue: under a title whose head noun says its section
lists methods ("Core Pallas design patterns", "Key Patterns", "Key optimization strategies"), each list item's label
names a technique and the item defines it, as evidence for the node the graph has or as a proposal (proposals.py); a
company's name is no proposal ("Apple also reduces ..."); and a reStructuredText grid table's border is no heading
underline (both seen in heldout29's run, session 50).
learned-28 (eval/ingest/runs/learned28-session50.md) reads a MultiMarkdown metadata block ("Title: ...", "Author: ...")
as a Markdown file's front matter, for its title and authors, not as prose (loaders.py); takes a graphics API's
pipeline object (bind groups, a compute or render pipeline, a pipeline layout) as another sense of software pipelining
(lexicon.OTHER_SENSES); and reads a sentence wholly in quotation marks, a cited title, as stating nothing (unstated.py;
all three seen in heldout30's run, session 50).
learned-29 (eval/ingest/runs/learned29-session50.md) takes every Bottleneck or Technique three or more of a document's
sentences name as one of its subjects (subject.RECURRING_ANY), not only the one named most: when no kept claim speaks
of it, the body sentence that names it and states a claim is its evidence, as for learned-25's subjects.
learned-30 (eval/ingest/runs/learned30-session51.md) reads what a section's technique makes worse as its cost, not a
remedy ("Increasing register usage means ... effectively reducing occupancy" under "Register tiling" is evidence for
occupancy as a cause; relations.WORSENED), and a chapter's title that tells what the chapter holds ("Debugging and
Profiling describes Nsight Compute") as a pointer (unstated.CHAPTER_DESCRIBES; both seen in heldout33's run), and a
data loader's prefetch, streams overlapping copies with kernels and Pallas's scalar prefetch as no software pipelining
(lexicon.OTHER_SENSES), and what a benchmark covers as no measuring rule (unstated.SCOPE).
learned-31 (eval/ingest/runs/learned31-session51.md) names memory latency where words stand between hiding and latency
("hiding even more latency"; not an ALU's or an instruction's), a cache's own eviction policy as no cache hint (the
lexicon's NEEDS_CONTEXT: a load, a store or a hint), and "upper-bound" as no bottleneck's head (all seen in heldout34's
run). learned-32 takes back the part of learned-31's wider alias that named a conflict's latency as memory's ("hides the
latency of the write conflict", seen in heldout36's run; eval/ingest/runs/learned32-session51.md). learned-33 reads
the same rules over documents whose Markdown headings are HTML (<h1>...<h6>; loaders.clean_markdown): such a page
now has its title and its sections (heldout37's downsampler page had neither), so what it says is read again.
learned-34 reads a troubleshooting list's nested "Solution: ..." item as a remedy for what the item above it names
("2. **Kernel Launch Overhead**:" over "- Solution: Kernel fusion or persistent kernels", heldout37's profiling
chapter; passages.remedied_item; eval/ingest/runs/learned34-session52.md). learned-35 names excess DRAM traffic in
fewer or redundant global memory accesses ("reduce global memory accesses", "global memory access redundancy") and
shared-memory tiling in data loaded into shared memory and reused there (lexicon; eval/ingest/runs/learned35-session52.md).
learned-36 reads a renderer's rasterization (coarse and fine stages, a software rasterizer) as another sense of
software pipelining and of a GEMM's tile order (lexicon.OTHER_SENSES; eval/ingest/runs/learned36-session52.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from .claims import Claim, Span, merge_claims
from .explained import explained, explaining
from .linking import EntityLinker, PassageLinks
from .loaders import Document
from .passages import Passage, in_item, is_statement, item_label, passages, remedied_item
from .proposals import ProposalFinder
from .requirements import gate_claims, requirement_claims
from .relations import PURPOSE, ClaimRules, SentenceView, heading_gains
from .precision import PRECISION_WEIGHTS, PrecisionModel
from .sense import SENSE_WEIGHTS, SenseCheck
from .scorer import WEIGHTS, ClaimScorer, DocumentTopics, focus, proposal_signals, view_signals
from .statement import similarity_pair
from .subject import recurring_subjects, subject_evidence, unspoken_subjects
from .support import gated
from .tables import measured_subjects, reads_whole, table_row
from .unstated import why_unstated

MIN_CONFIDENCE = 0.5
# Changing how claims are read changes this: files read by another version are read again, and
# what the old version said about them is taken back.
# Every change to the rules changes what each of the four reads, so they share one round number (since learned-30).
ROUND = 36
VERSION = f"precision-{ROUND}"  # the learned extractor and the precision model (precision.py)
LEARNED_VERSION = f"learned-{ROUND}"  # the scorer's choice, the default
SENSE_VERSION = f"sense-{ROUND}"  # the learned extractor and the sense check (sense.py)
RULES_VERSION = f"rules-{ROUND}"  # the rules alone, when no scorer is used
# A claim on an existing node whose sentence is this far by meaning from the node's text (cosine of their embeddings)
# is dropped: the sentence uses the name in another sense or only mentions it. Chosen on the judged items of the tune
# material, heldout6 to 6c included (what learned-4, which introduced it, dropped there:
# eval/ingest/runs/tune-learned4-judgement.md).
FAR = 0.22
# With a scorer the rules only propose: any candidate scoring this much is shown to the scorer.
CANDIDATE_BAR = 0.3


@dataclass(frozen=True)
class RuleSettings:
    min_confidence: float = MIN_CONFIDENCE
    learned: bool = True  # use the learned scorer when its weights are installed
    # The sentence-level precision model over what the scorer keeps, when asked for and installed. Off by
    # default: it raised cross-validated precision on the tune documents by about one standard error, but on
    # the held-out documents (heldout4, heldout4b) and the development set it lost items and gained no
    # precision (README, "Measured on a 2-core CPU").
    precision: bool = False
    # The sense check over what is kept (sense.py), when asked for and installed. Off by default: fitted on the tune
    # material's judged items, it raised precision by document cross-validation and on the later held-out half, at a
    # cost in recall (README, "Ingesting documents").
    sense: bool = False


class Reading(NamedTuple):
    """One pass over a document's statements: how often each node is named, and every statement seen in context."""
    topics: DocumentTopics
    views: list[SentenceView]


class RuleExtractor:
    """Claims from a document without a model endpoint."""

    name = "rules"

    def __init__(self, linker: EntityLinker, settings: RuleSettings = RuleSettings(),
                 scorer: ClaimScorer | None = None, precision: PrecisionModel | None = None):
        self.linker = linker
        self.settings = settings
        if scorer is None and settings.learned and WEIGHTS.is_file():
            scorer = ClaimScorer.load()
        if precision is None and scorer is not None and settings.precision and PRECISION_WEIGHTS.is_file():
            precision = PrecisionModel.load()
        self.scorer = scorer
        self.precision = precision if scorer is not None else None
        self.sense = SenseCheck.load() if settings.sense and scorer is not None and SENSE_WEIGHTS.is_file() else None
        self.rules = ClaimRules(linker, self.name)
        self.weak_rules = ClaimRules(linker, self.name, edge_bar=CANDIDATE_BAR, evidence_bar=CANDIDATE_BAR)
        self.proposals = ProposalFinder(linker, self.name)
        self.version = (RULES_VERSION if scorer is None else SENSE_VERSION if self.sense is not None
                        else LEARNED_VERSION if self.precision is None else VERSION)

    def extract(self, doc: Document) -> list[Claim]:
        ruled, weak, reading = self._read(doc)
        kept = self.stated([c for c in self.kept(ruled, weak) if not far_by_meaning(c)])
        if self.scorer is not None:  # learned-6: weak support is kept below the default bar, not emitted at it
            kept = [c for c in gated(kept) if c.confidence >= self.settings.min_confidence]
            # learned-25: what the document is about (the node its title names or its sentences name most), when
            # nothing kept speaks of it, from the sentence that best states a claim about it
            kept += [c for c in gated(self.subject(doc, kept, reading)) if c.confidence >= self.settings.min_confidence]
        return merge_claims(self.sense.filter(kept, self.linker) if self.sense is not None else kept)

    def subject(self, doc: Document, kept: list[Claim], reading: Reading | None = None) -> list[Claim]:
        """Evidence for what the document is about, the nodes its title names or its sentences name most, where no
        kept claim speaks of them (subject.py); `reading`: the document's pass of _read, if made already (else its
        statements are read here, unlinked: subject reads no passage's links)."""
        if reading is None:
            parts = passages(doc)
            reading = Reading(self._topics(doc, parts),
                              [view for passage in parts for view, _ in self._views(doc, passage, PassageLinks())])
        topics, views = reading
        recurring = recurring_subjects(topics.sentences_naming, self.linker.kind_of)
        wanted = unspoken_subjects(doc.title or "", recurring, kept, self.linker.mentions)
        if not wanted:
            return []
        return subject_evidence(doc.title or "", wanted, views, self.linker, self.name, FAR)

    def kept(self, ruled: list[Claim], weak: list[Claim]) -> list[Claim]:
        """What the rules keep at their bars, and the weak candidates the scorer keeps."""
        kept = [c for c in ruled if c.confidence >= self.settings.min_confidence]
        if self.scorer is not None:
            seen = {_key(c) for c in kept}
            scored = (replace(c, confidence=round(self.scorer.confidence(dict(c.signals)), 2)) for c in weak)
            kept += [c for c in scored if c.confidence >= self.settings.min_confidence and _key(c) not in seen]
        return kept

    def stated(self, claims: list[Claim]) -> list[Claim]:
        """The claims whose sentence, by the precision model, states them (all of them without the model)."""
        if self.precision is None:
            return claims
        return [c for c in claims if self.precision.states(dict(c.signals))]

    def candidates(self, doc: Document) -> list[Claim]:
        """Every claim the rules with low bars and the proposal finder see, with its signals and the rules'
        own score: what the scorer is trained on."""
        return self.read(doc)[1]

    def read(self, doc: Document) -> tuple[list[Claim], list[Claim]]:
        """The claims the rules keep at their own bars (with the proposals), and the weak candidates the rules
        see with low bars (with the proposals too), each carrying its signals."""
        return self._read(doc)[:2]

    def _read(self, doc: Document) -> tuple[list[Claim], list[Claim], Reading]:
        """read's claims, and the pass over the document they came from (for subject)."""
        parts = passages(doc)
        topics = self._topics(doc, parts)
        title = doc.title or ""

        def stated(claims: list[Claim], view: SentenceView, start: int) -> list[Claim]:
            """The claims one sentence may state (unstated.py), with their signals when a scorer will read them."""
            kept = _stated(claims, view, title)
            return kept if self.scorer is None else _signed(kept, view, topics, start)

        ruled: list[Claim] = []
        weak: list[Claim] = []
        views: list[tuple[SentenceView, int]] = []  # every statement, with where it starts in the document
        unnamed: list[tuple[SentenceView, str]] = []  # sentences that may explain their passage's node in other words
        for passage, about in zip(parts, self.linker.link(parts)):
            for view, start in self._views(doc, passage, about):
                views.append((view, start))
                node_id = explaining(view, self.linker.kind_of)
                if node_id is not None:
                    unnamed.append((view, node_id))
                ruled.extend(stated(self.rules.claims(view), view, start))
                if self.scorer is not None:
                    weak.extend(stated(self.weak_rules.claims(view), view, start))
        proposals = [replace(c, signals=c.signals + tuple(proposal_signals(c, topics).items()))
                     for c in self.proposals.claims(doc, parts) if not why_unstated(c, c.evidence.quote, [])]
        if self.scorer is not None:  # learned-8: evidence from a sentence that explains its passage's node unnamed
            starts = {view.span: start for view, start in views}
            ruled += [c for view, claim in explained(unnamed, self.linker, self.name, topics.sentences_naming)
                      for c in stated([claim], view, starts[view.span])]
            # and a requirement clause no metric states, about a technique this document proposes
            # (not one named by a head noun alone: learned-10's weakest source, support.py)
            proposed = list({c.subject.key: c.subject for c in proposals if not c.subject.id
                             and c.subject.kind == "Technique" and not dict(c.signals).get("head_noun_only")}.values())
            ruled += [c for view, start in views
                      for c in stated(requirement_claims(view, proposed, self.name), view, start)]
            # learned-22: and what the sentence says stops a technique, of the graph or proposed, working or paying
            ruled += [c for view, start in views for c in stated(gate_claims(view, proposed, self.name), view, start)]
        sections = sorted(doc.sections, key=lambda s: s.start)
        ruled += heading_gains(sections, self.linker.mentions, doc.location, self.name)
        # One speedup, one technique: a sentence whose speedup the document's own new technique claims ("MXFP8 GEMMs
        # are accelerated using cuBLAS ..., achieving up to 2x") gives none to a known technique named as its means.
        claimed = {c.evidence.quote for c in proposals if c.relation == "GAIN"}
        ruled, weak = ([c for c in group if c.relation != "GAIN" or c.evidence.quote not in claimed]
                       for group in (ruled, weak))
        if self.scorer is not None:
            ruled, weak, proposals = self._with_similarity(ruled, weak, proposals)
        return ruled + proposals, weak + proposals, Reading(topics, [view for view, _ in views])

    def _with_similarity(self, *groups: list[Claim]) -> tuple[list[Claim], ...]:
        """Each claim's sentence compared by meaning with its node's text and with the other nodes of that kind
        (one batch of embeddings per document, for the distinct quotes)."""
        quotes = list(dict.fromkeys(c.evidence.quote for group in groups for c in group))
        vectors = self.linker.embed(quotes)
        if vectors is None:
            return groups
        by_quote = dict(zip(quotes, vectors))
        nodes = self.linker.node_vectors()
        out = []
        for group in groups:
            out.append([replace(c, signals=c.signals + tuple(zip(
                ("sentence_similarity", "similarity_margin"),
                similarity_pair(by_quote[c.evidence.quote], focus(c)[0], nodes, self.linker.kind_of)))) for c in group])
        return tuple(out)

    def _topics(self, doc: Document, parts: list[Passage]) -> DocumentTopics:
        """How often each node is named in the document's sentences, and what its title names."""
        counts: dict[str, int] = {}
        for passage in parts:
            for sentence in passage.sentences:
                for m in self.linker.mentions(sentence.text):
                    counts[m.id] = counts.get(m.id, 0) + 1
        in_title = frozenset(m.id for m in self.linker.mentions(doc.title or ""))
        return DocumentTopics(counts, in_title, doc.text, doc.title or "")

    def _views(self, doc: Document, passage: Passage, about):
        """Each statement of the passage, and each table row stating a measured figure of a node (learned-13), seen
        with its context; with where it starts in the document."""
        headings = [self.linker.mentions(title) for title in reversed(passage.headings)]
        heading_text = " > ".join(passage.headings)
        previous: list = []
        lead = ""  # the line ending in a colon that opens the list the sentence is an item of
        for sentence in passage.sentences:
            named = self.linker.mentions(sentence.text)
            item = in_item(doc.text, sentence.start)
            row = table_row(doc.text, doc.raw, sentence.start)
            header = row.headers if row is not None and reads_whole(row, sentence.text) else ()
            label = item_label(doc.text, sentence.start) if item else ""
            # learned-34: a nested "Solution: ..." item remedies what the item above it names, as a technique's
            # section under a bottleneck's would: that item's label is its nearest heading
            parent = remedied_item(doc.text, sentence.start) if item else ""
            if is_statement(sentence.text) or measured_subjects(sentence.text, header, named) or parent:
                yield SentenceView(sentence.text, Span(sentence.text, doc.location(sentence.start)), named,
                                   [self.linker.mentions(parent), *headings] if parent else headings, previous, about,
                                   f"{heading_text} > {parent}" if parent else heading_text,
                                   self.linker.mentions(label) if label else [], lead if item else "",
                                   header), sentence.start
            previous = named
            lead = sentence.text if sentence.text.rstrip().endswith(":") else lead if item else ""


def far_by_meaning(claim: Claim) -> bool:
    """Evidence, a remedy or a gain on an existing node whose sentence is far by meaning from the node's text (signals
    read with the embedding model; without them, or for a node without a vector, similarity_pair gives 0.0 and nothing
    is far). A precondition's or a threshold's sentence speaks of metrics and shapes, not of the node: not tested; nor a
    speedup a section title states ("2.0: Complete rewrite, 2x faster"), whose few words say nothing of the node."""
    signals = dict(claim.signals)
    if signals.get("heading_stated") or signals.get("measured_row"):
        return False
    similarity = signals.get("sentence_similarity")
    return (claim.relation in ("SUPPORTS", "ADDRESSED_BY", "GAIN") and bool(claim.subject.id) and bool(similarity)
            and similarity < FAR)


def _stated(claims: list[Claim], view: SentenceView, title: str = "") -> list[Claim]:
    """The claims whose sentence may state them (unstated.py): none that it points elsewhere, is code, or names
    in passing. A remedy may take its technique from its list item's label, from the nearest heading naming nodes
    (a technique's section in a catalogue of remedies), or from the previous sentence when this one goes on with a
    purpose; not from the document's own title: on a page about one technique (heldout6: "Autotuning with the DSL",
    "Software Pipelining") a sentence that names only a bottleneck states no remedy."""
    texts = view.heading_text.split(" > ")[::-1]  # nearest first, as view.headings
    nearest = next(((mentions, text) for mentions, text in zip(view.headings, texts) if mentions), ([], ""))
    context = list(view.label) + ([] if title and nearest[1].strip() == title.strip() else list(nearest[0]))
    if PURPOSE.search(view.text):  # "..., to minimize the number of transactions" goes on from the previous sentence
        context += view.previous
    headed = frozenset(m.id for m in context)
    # learned-25: nor its bottleneck from the title alone: on a page titled for a bottleneck ("Vulkan Per-Submit
    # Overhead ...") a sentence that names only a technique is no remedy for it
    titled = frozenset(m.id for m in nearest[0]) - headed if title and nearest[1].strip() == title.strip() else frozenset()
    stated = {m.id for m in view.named} | headed | {m.id for m in view.previous if PURPOSE.search(view.text)}
    return [c for c in claims if not why_unstated(c, view.text, view.named, headed, view.context_text, view.header)
            and not (c.relation == "ADDRESSED_BY" and c.subject.id in titled and c.subject.id not in stated)]


def _signed(claims: list[Claim], view: SentenceView, topics: DocumentTopics, start: int) -> list[Claim]:
    """The claims read from one sentence, each carrying its signals; a table row's claim on the node its subject cell
    names, with a measured figure, is marked (learned-19): its few words are far by meaning from any node's text."""
    measured = {m.id for m in measured_subjects(view.text, view.header, view.named)}
    return [replace(c, signals=tuple(view_signals(c, view, topics, start).items())
                    + ((("measured_row", 1.0),) if c.subject.id in measured else ())) for c in claims]


def _key(claim: Claim) -> tuple[str, str, str, str]:
    """A claim read from one sentence: its triple and its quote."""
    return (*claim.triple, claim.evidence.quote)
