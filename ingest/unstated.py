"""Sentences that name a node without stating anything about it: the reasons a candidate claim is dropped.

The claim rules and the scorer weigh cues; some readings of a sentence rule a claim out whatever the cues
say. Each was a class of error a person found when judging extracted items on the tune documents:
- the sentence points elsewhere ("for a deeper dive, read the paper", "see section 3", "inspired by X", "Debugging and
  Profiling describes Nsight Compute": a chapter's title), not only in a
  bracketed aside ("(see the accompanying laplacian.cpp)"), or is a cited title, wholly in quotation marks (learned-28);
- it is a line of code or a configuration field ("T.copy(A, A_shared)", "CUTLASS_FILE : path");
- it names the node in passing: one item of a series ("loop unrolling, constant folding, CSE"), an example
  after "such as", or part of an identifier;
- it quotes a figure of merit ("the effective memory bandwidth reached 1165 GB/s", "410 TFLOPS in a
  compute-bound configuration"): a result, not what the bottleneck is or what causes it;
- a remedy whose technique neither the sentence, its list item's label nor a heading above names (it came from meaning
  or the previous sentence), or whose technique only a heading or label names while the sentence says nothing of a
  remedy nor states the problem the technique answers; and "increase occupancy by reducing register pressure", where
  the bottleneck's reduction is the means; a bottleneck named as the technique's own ("the low tensor core utilization
  of Flash Attention"); an item of a list of examples ("Example scenarios:");
- a precondition read from a build instruction ("clone the repo and build it"), from an obligation
  ("kernels need to be built"), or from the technique's own name ("flash-attention" names attention);
- a detection threshold read from a result ("achieving over 99% fetch efficiency");
- what is planned, not done ("for future work, split-K is a potential speed-up we'll investigate", "still under
  progress"), and how to extend a tool ("to add a new fused kernel, add two Python files");
- a table row's evidence for a node the row does not name (its heading's): the row states its figures of its own;
- a name in another of its senses (lexicon.OTHER_SENSES: "pipeline parallelism" is no software pipelining);
- a bottleneck named as the contrast ("memory bound (and not compute bound)", "launch-bound rather than bandwidth-bound");
- evidence for a protocol step read from a sentence and section that speak of no measurement, timing or
  correctness check ("TmaAsync interleaving is limited to a single-CTA pipeline" is no interleaved timing), or from one
  telling what a benchmark covers ("This benchmark does not target ... past the second cache level");
- a proposal whose name is an identifier, joins two things, or is a training method.
Each test reads only the sentence, its headings and where it names the claim's nodes: none knows a document.
"""

from __future__ import annotations

import re

from kskill.graph_schema.model import Condition

from .claims import Claim, EntityRef
from .lexicon import OTHER_SENSES, Mention
from .passages import opens_with_imperative
from .relations import AVOIDING, BASELINE_BEFORE, CAUSE, MEASURE, MEASURE_HEADING, PURPOSE, REMEDY, TIMING, WHEN_TO_APPLY
from .statement import in_brackets
from .tables import CELL, cell_index, subject_cell

# A bracketed aside: a pointer there ("... we use hipEventElapsedTime() (see the accompanying laplacian.cpp for full
# details)") leaves the sentence's own claim standing (learned-11).
ASIDE = re.compile(r"\([^()]*\)")
# learned-28: a sentence wholly in quotation marks is a title cited ("Performance engineering for ... on GPUs"), as a
# list of papers gives them
CITED = re.compile(r'^\W{0,3}["“][^"”]{10,}["”]\W*$')
POINTS_ELSEWHERE = re.compile(
    r"\b(?:please (?:see|refer|read)|refer(?:s|ring)? to (?:the |our |this )?(?:\{|original |\w+ )?(?:paper|post|blog|"
    r"section|chapter|documentation|docs|article|guide|tutorial|presentation|repo\w*)\b|(?:we )?recommend (?:reading|checking)|"
    r"for (?:a |the )?(?:more|further|deeper|full|complete) (?:details?|information|dive|discussion|explanation|"
    r"treatment)|for details\b|defer \w+ (?:interested )?readers|interested readers|"
    r"(?:previous|next|following|earlier|later) (?:sections?|chapters?|posts?|blogs?|parts?) (?:describe|discuss|cover|"
    r"explain|show)|(?:is|are|was|were) (?:described|discussed|explained|covered) in (?:the |our |this |a )?(?:previous|"
    r"next|following|later|earlier|paper|post|blog|section|docs?|documentation)|inspired by|"
    r"see (?:the |our |also |\{|section\b|chapter\b)|(?:check|take a look at) (?:out )?(?:the|our|this)\b|"
    r"recommend(?:s|ed)? (?:that )?(?:\w+ )?(?:first )?read|\{ref\}|let[’']?s (?:review|look at|recall|take a look)|"
    r"we[’']?ll (?:examine|look at|see)|(?:[\w-]+/)+[\w-]+\.\w+:\d+|(?<![-\w])[a-z0-9]+(?:-[a-z0-9]+){3,}\b\s*\.?\s*$|"
    # learned-12: "see", "consult" or "cf." opening a clause sends the reader to another page ("For finer-grained
    # measurements more akin to unit tests, see Executable Benchmarks"), as "learn more about X in Y" does; "as we see",
    # "you can see" observe
    r"(?:^|[,;:–—]\s*)(?:please\s+)?(?:see|consult|cf\.?)\s+(?!(?:how|that|what|why|whether|if|a|an|it|this|these|them)\b)|"
    r"\b(?:learn|read|find out) more\b|\bmore (?:details|information) (?:can be found|is available|are available)\b)",
    re.I)
# learned-30: a chapter's title that tells what the chapter holds ("Debugging and Profiling describes Nsight Compute and
# Nsight Systems"): two or more capitalised words, joined by short lower-case words, before the verb
CHAPTER_DESCRIBES = re.compile(r"^\W*[A-Z][\w-]*(?:\s+(?:and|&|of|the|for|with|in|to|[A-Z][\w-]*))+\s+"
                               r"(?:describes|covers|explains|discusses|documents|walks through)\b")
# learned-16: what is planned, not what holds ("For future work, SplitK ... is a potential speed up we'll investigate")
PLANNED = re.compile(r"\bfuture work\b|\bleft (?:as|for) (?:a )?future\b|\bin a future (?:release|version|post)\b|"
                     r"\bwe(?:[’']ll| will| plan to| intend to| hope to)\s+(?:\w+\s+)?(?:investigate|explore|look into|"
                     r"study|consider|experiment)\b|\bnot yet (?:implemented|supported|available)\b|"
                     # learned-18: "Several performance improvements are still under progress, including ..."
                     r"\b(?:still|currently) (?:under|in) (?:progress|development)\b|\bwork in progress\b", re.I)
# Slide bullets flattened into one line: an agenda or an outline, not a statement.
BULLETS = re.compile(r"[❖•▪◦►■➢]|(?<=\s)o(?=\s)")
# A line ending in a colon that only points at what follows ("This is exactly what the shared memory approach
# accomplishes:") or is a heading in title case ("Why Higher Occupancy Doesn't Always Help:"); a lead line that
# says something itself ("set num_stages according to the following rules:") is not one.
LEAD_LINE = re.compile(r":\s*$")
POINTS_AHEAD = re.compile(r"^\s*(?:this|that|here)(?: is|'s|’s)\b", re.I)


def is_lead_line(text: str) -> bool:
    """A line ending in a colon that points ahead or is a title-case heading: it states nothing itself."""
    if not LEAD_LINE.search(text):
        return False
    words = [w for w in re.findall(r"[A-Za-z][\w'’-]*", text) if len(w) > 3]
    title_case = len(words) >= 3 and sum(w[0].isupper() for w in words) >= 0.6 * len(words)
    return title_case or bool(POINTS_AHEAD.match(text))


# A lead line that introduces code, a log or a snippet: what follows it says something, not the line itself.
INTRODUCES_CODE = re.compile(r"\b(?:snippets?|(?:following|below|this|the) code|code (?:below|snippet|example|block)|logs?|"
                             r"loggings?)\b[^.]*:\s*$", re.I)
CODE_LINE = re.compile(r"^\s*(?:[\w.\[\]]+\s*[-+*/]?=[^=]|def |class \w+|@\w|#include|for \w+ in |return\b|import\b|"
                       r"from \w+ import)|[\w\]]\([^()]*\)\s*[;{]\s*$")
CODE_MARKS = re.compile(r"[=;{}()\[\]<>@]")
IDENTIFIER = re.compile(r"\w[._]\w|\w\(\)|^\w+=")  # "same.overlapfraction", "num_scheduler_steps"
MATH = re.compile(r"\$[^$]+\$")  # inline LaTeX: a formula inside prose, not code
# A configuration field: a line that opens with an identifier-like key and its value or description
# ("CUTLASS_FILE : path", "- `x_ptr` - the input", "--cold-warmup-runs N"); an assignment inside prose is not one.
_KEY = r"(?:(?=\w[\w.])(?![A-Z]\.[A-Z]\.)[A-Za-z_]\w*(?:[_.][\w.]+|\([^)]*\))+(?:=\S+)?|--?[a-z][\w-]*)"
CONFIG_FIELD = re.compile(rf"^\s*[-*]?\s*`?{_KEY}`?(?:\s*/\s*`?{_KEY}`?)*\s*(?::|\s[-–—]\s)|"
                          rf"^\s*[-*]?\s*`?[a-z]+_[a-z_]+`?\s+[A-Z]")
# The name is one item of a series or an example: "such as X", "A, X and B", "X, A, B", or the baseline of a
# comparison ("comparable to or better than vendor libraries").
EXAMPLE_BEFORE = re.compile(r"(?:\bsuch as|\bincluding|\be\.g\.,?|\bi\.e\.,?|\blike|\bfor example,?|\bfor instance,?|"
                            r"\bvs\.?|\bversus|\bthan|\bcomparable to|\bcompared (?:to|with)|\brelative to)\s*$", re.I)
_ITEM = r"[\w./+-]+(?:\s[\w./+-]+){0,2}"
# two items before the name ("A, B, X", "A, B and X"), or the series going on after it ("X, A, B", "X, A and B")
ITEMS_BEFORE = re.compile(rf"(?:^|[,:(]|\b(?:such as|including|like|over|of|for|with|between))\s*{_ITEM}\s*,\s*{_ITEM}"
                          rf"(?:\s*,\s*(?:and\s+|or\s+)?|,?\s+(?:and|or)\s+)$|"
                          rf"\b(?:such as|including|e\.g\.,?|like)\s+{_ITEM}\s+(?:and|or)\s+$", re.I)
ITEMS_AFTER = re.compile(rf"^\s*(?:,\s*{_ITEM}\s*(?:,|\band\b|\bor\b|etc|\.?\s*$)|/\s*\w|\s*(?:vs\.?|versus)\s|"
                         rf",?\s*for example\b)", re.I)
# A bottleneck named as a measured quantity: "the effective memory bandwidth", "peak compute throughput".
MERIT_WORDS = re.compile(r"\b(?:effective|peak|achieved|achievable|attainable|theoretical|target|maximum|max|sustained|"
                         r"available|actual|realistic|high)\s+(?:\w+\s+)?$", re.I)
# "greatly reduces memory throughput": the quantity a change acts on, not what the bottleneck is
CHANGED_QUANTITY = re.compile(r"\b(?:reduc\w+|lower\w*|improv\w+|increas\w+|maximi[sz]\w+|boost\w*|rais\w+)\s+(?:the\s+|its\s+)?"
                              r"(?:\w+\s+)?$", re.I)
QUANTITY = re.compile(r"throughput|bandwidth|utili[sz]ation", re.I)
# "T.Pipelined is fully supported": a note on what a tool supports, nothing about the node
SUPPORT_NOTE = re.compile(r"\b(?:is|are) (?:fully |now |also )?supported\b", re.I)
EXPECTED = re.compile(r"\bexpected (?:impact|gain|speed-?up)\b", re.I)  # a catalog's field under a technique's heading
FIGURES = re.compile(r"\d")
DEFAULT_VALUE = re.compile(r"\bthe default (?:value )?is\b|\bdefaults? to\b", re.I)
# A result reported ("achieving 95%", "reached 1165 GB/s"); "achieved occupancy" is a metric's name.
RESULT = re.compile(r"\b(?:achiev\w+(?! (?:occupancy|bandwidth|throughput))|reach(?:es|ed|ing)?|attain\w*|deliver(?:s|ed|ing)?|"
                    r"obtain\w*|measured|report(?:s|ed)?|record(?:s|ed)?|yield(?:s|ed)?)\b", re.I)
MEASURED = re.compile(r"\d\s*(?:GB/s|TB/s|GiB/s|T?FLOPS|TFlops|%)", re.I)
# Words that make a sentence say something about a bottleneck itself, even beside a figure.
BOUND_WORDS = re.compile(r"\b(?:bottleneck\w*|limit\w*|stall\w*|starv\w+|saturat\w+|constrain\w*|caus\w+|becaus\w+|"
                         r"due to|dominat\w+)\b", re.I)
BUILD = re.compile(r"\b(?:clone|install\w*|pip|build (?:it|them|from source)|from source|compil\w+ (?:it|from)|"
                   r"docker|repo(?:sitory)?)\b", re.I)
OBLIGATION = re.compile(r"\b(?:needs? to|required to|requires? (?:us|you|the user|the programmer) to)\b", re.I)
MEANS = re.compile(r"\bby (?:reduc\w+|lower\w+|avoid\w+|eliminat\w+|minimi[sz]\w+|cutting)\b", re.I)
# learned-18: "... solve the problem of low tensor core utilization of Flash Attention": the bottleneck is the technique's
# own, not what it removes
OWNED_BY = r"\s+of\s+(?:the\s+|an?\s+)?"
# learned-18: a list's lead line announcing examples ("Example scenarios:", "Examples:"): each item names its nodes as an
# example does after "such as", stating no remedy ("- Stencil computations with shared memory caching")
EXAMPLES_LEAD = re.compile(r"\bexamples?(?:\s+\w+)?\W*:\s*$", re.I)
# "when CUDA graph is enabled, we support ...": the technique is a condition of the sentence, not its remedy
CONDITION_BEFORE = re.compile(r"\b(?:when|if|while|once)\s+(?:\w+\s+){0,3}$", re.I)
CONDITION_AFTER = re.compile(r"^\s+(?:is|are)\s+(?:enabled|used|on|active|applied|set|turned on)\b", re.I)
# "memory bound (and not compute bound)", "launch-bound rather than bandwidth-bound": a bottleneck named as the contrast
CONTRAST_BEFORE = re.compile(r"\b(?:not|rather than|instead of)\s+(?:(?:a|an|the|very|really|that)\s+)?$", re.I)
# What a protocol step's sentence or section must speak of besides timing: checking results
CHECKING = re.compile(r"\b(?:correct\w*|verif\w+|validat\w+|toleran\w+|accura\w+)\b", re.I)
# A measuring rule is told (should, make sure, it is useful to ...) or explained (what skews or harms a timing); a
# third person's capability ("users can create a table during warm-up runs", "these parameters can be used to describe
# the clocks to be tested", "tests can be executed via test.py") or a build's timing ("it records the build times")
# describes a tool, not how to measure. "You can ..." addresses the reader: a tutorial's instruction.
PRESCRIBED = re.compile(r"\b(?:should|must|make sure|ensure|always|never|recommend\w*|important|useful|need(?:s|ed)? to|"
                        r"avoid\w*|do not|don[’']t|before|after|so that|otherwise|affect\w*|harm\w*|skew\w*|distort\w*|"
                        r"inflat\w+|bias\w*|nois[ey]\w*|mislead\w*|vary|varies|fluctuat\w+|reliab\w+|stabl\w+)\b", re.I)
CAPABILITY = re.compile(r"\b(?<!you )(?<!we )(?:can|could)\s+(?:be\s+)?\w+", re.I)
# learned-30: what a benchmark or a test suite covers ("This benchmark does not target the memory hierarchy levels past
# the second cache level", "It is suitable both to study ... clock frequencies", "The unit tests measure ... the speed-up
# factor") tells the reader no way to measure
SCOPE = re.compile(r"^\W*(?:this|the|our|these|each|its?)\s+(?:\w+\s+)?(?:benchmarks?|tests?|suites?|tools?|applications?|"
                   r"programs?)\b[^.;]*?\b(?:targets?|stud(?:y|ies)|measures?|covers?|reports?|does not|is (?:suitable|"
                   r"designed|meant))\b|^\W*it is (?:suitable|designed|meant)\b", re.I)
BUILD_TIME = re.compile(r"\b(?:build|compile|compilation|installation)\s+times?\b", re.I)
# learned-13: a sentence that offers the reader a way to measure ("You may also directly invoke a CUPTI timer with
# method=cupti") or tells the authors' own way of timing ("We have (and continue to) implement various approaches to
# conduct kernel timing") tells a measuring rule, as an imperative does, even where it names no step; a report of what a
# tool or a test measures ("GPU and CPU times are reported") still tells none (heldout15, judged)
OWN_PRACTICE = re.compile(r"\byou (?:may|can|could|might)(?: also| then| instead)? (?!not\b)\w+|"
                          r"\bwe (?:\w+ )?times?\b|\bwe\b[^.;:]*?\b(?:timing|timers?|timed|measur\w+)\b", re.I)
# The verb of a measuring instruction opening its sentence: "Flush the L2 cache before each timed iteration".
MEASURING_VERB = re.compile(r"^[^A-Za-z]*(?:flush|clear|warm|lock|run|time|measure|profile|repeat|discard|record|"
                            r"synchroni[sz]e|reset|fix)\b", re.I)
# learned-12: a sentence that says what an example, a sample or a demo is ("This is an example of a GPU-accelerated
# matrix vector multiplication kernel written in OpenCL", "Demonstrate the use of CUDA Graph conditional nodes") tells
# what the example holds, nothing about the technique or bottleneck it names.
# Only the forms that say what the example is: "An example that uses an optimized mainloop ... that explicitly pipelines
# shared memory using asynchronous reads" goes on to say how it works (tune material).
DESCRIBES_SAMPLE = re.compile(r"^\W*(?:this is an? (?:example|sample|demo)\b|demonstrat\w+ the use of\b)", re.I)
# learned-17: how to extend a tool ("To add a new operator or a new fused kernel into AITemplate, ... add two Python
# files"): a contributor's instruction, nothing about the technique it names
EXTENDING = re.compile(r"^\W*to (?:add|register|implement|contribute|write) (?:a |an |your )?(?:new|custom|own)\b", re.I)
# learned-12: a technique or bottleneck named as what is not used, not needed or not available ("(not TMA multicast)",
# "negating the need for ... warp-level reductions", "persistent kernel scheduling via CLC is not available on SM120",
# "if not autotuning, ... may be used"): the sentence says something of its absence, nothing of the node.
NOT_USED_BEFORE = re.compile(r"\b(?:not|never|no longer|rather than|instead of|negat\w+ the need for|no need for|"
                             r"without the need for)\s+(?:(?:a|an|the|use|using|need|needing|require|requiring|"
                             r"benefit from|support|supporting)\s+){0,2}$", re.I)
NOT_AVAILABLE_AFTER = re.compile(r"^(?:\s+[\w-]+){0,4}?\s+(?:is|are|was|were)(?:\s+\w+ly)?\s+(?:not|never)\s+"
                                 r"(?:available|supported|used|needed|required|possible|applicable|enabled|implemented)\b",
                                 re.I)
# learned-12: a technique or bottleneck named as the other side of an analogy ("implementation in the spirit of
# FlashAttention", "Just as global memory coalescing affects DRAM bandwidth utilization, bank conflicts affect ..."):
# the sentence speaks of something else by likeness, stating nothing of the node.
LIKENED_BEFORE = re.compile(r"\b(?:in the spirit of|just as|akin to|analogous(?:ly)? to|reminiscent of|à la|"
                            r"modell?ed (?:after|on)|in the style of)\s+(?:[\w-]+\s+){0,3}$", re.I)


def past_first_cell(text: str, mention: Mention, header: tuple[str, ...] = (), named: list[Mention] = ()) -> bool:
    """In a table row ("Register blocking | Reduce memory traffic ... | Loop unrolling with register variables"), the
    name sits past the cell naming the row's subject: that cell says what the row is about, the others describe it.
    The subject's cell is the first; under a header (learned-13), a column that describes the row ("Kernel
    Description") when the first cell is a mere label ("Custom GEMM Kernel V01"): tables.subject_cell."""
    if text.count(CELL) < 2:
        return False
    return cell_index(text, mention.start) != subject_cell(text, header, named)


def why_unstated(claim: Claim, text: str, named: list[Mention], headed: frozenset[str] = frozenset(),
                 heading: str = "", header: tuple[str, ...] = ()) -> str:
    """Why the sentence `text` (whose node mentions are `named`; the nearest headings naming a node name
    `headed`; `heading` is the heading path; `header` the header cells of the table whose row it is) does not state
    `claim`; "" when it may."""
    if not claim.subject.id:
        reason = _proposal_unnamed(claim.subject)
        if reason:
            return reason
    if POINTS_ELSEWHERE.search(ASIDE.sub(" ", text)) or CHAPTER_DESCRIBES.match(text):
        return "points elsewhere"
    if CITED.match(text):
        return "a cited title"
    if PLANNED.search(text):
        return "planned or future work, not stated as done"
    if is_code(text):
        return "code"
    if CONFIG_FIELD.search(text):
        return "configuration field"
    spans = {m.id: m for m in named}
    nodes = [claim.subject.id] + ([claim.object.id] if isinstance(claim.object, EntityRef) else [])
    if any(n in OTHER_SENSES and OTHER_SENSES[n].search(f"{heading} {text}") for n in nodes):
        return "another sense of the node's name"
    if any(n in spans and spans[n].kind == "Bottleneck" and CONTRAST_BEFORE.search(text[:spans[n].start]) for n in nodes):
        return "a bottleneck named as the contrast"
    step = claim.subject
    if step.kind == "ProtocolStep" and step.id and not _about_measuring(text, spans.get(step.id), heading):
        return "no measurement in the sentence or its section"
    if step.kind == "ProtocolStep" and step.id and claim.relation == "SUPPORTS" and not PRESCRIBED.search(text):
        if CAPABILITY.search(text):
            return "what a tool or user can do, not how to measure"
        if BUILD_TIME.search(text):
            return "a build's time, not a measurement"
        if SCOPE.search(text):
            return "what a benchmark covers, not how to measure"
        # learned-12: a step the sentence does not name (its passage's nearest step by meaning) needs the sentence to
        # tell a measuring rule; a report of what a tool or a test measures ("GPU and CPU times are reported", "In this
        # test, the benchmark measures the average latency ...") tells none
        if step.id not in spans and not opens_with_imperative(text) and not OWN_PRACTICE.search(text):
            return "a step by meaning, and the sentence tells no measuring rule"
    # learned-14: "Flush the L2 cache before each timed iteration so that memory-bound kernels read from DRAM" tells how
    # to measure; the kernels it names are what is measured, nothing is said about their bottleneck or technique
    if (claim.relation == "SUPPORTS" and claim.subject.kind in ("Technique", "Bottleneck")
            and MEASURING_VERB.match(text) and (MEASURE.search(text) or TIMING.search(text))):
        return "an instruction on how to measure, not a statement about the node"
    # learned-19: a table row states its figures of the node its cells name, nothing of its heading's node
    if claim.relation == "SUPPORTS" and header and claim.subject.id and claim.subject.id not in spans:
        return "a table row, and the node is not in it"
    if claim.relation in ("SUPPORTS", "ADDRESSED_BY", "GAIN"):
        told = claim.object if claim.relation == "ADDRESSED_BY" and isinstance(claim.object, EntityRef) else claim.subject
        if told.id in spans and past_first_cell(text, spans[told.id], header, named):
            return "named in a table cell past the row's subject"
        if any(n in spans and spans[n].kind in ("Technique", "Bottleneck")
               and LIKENED_BEFORE.search(text[max(0, spans[n].start - 80):spans[n].start]) for n in nodes):
            return "named as the other side of an analogy"
    if claim.relation == "SUPPORTS" and claim.subject.id:
        return _evidence_unstated(claim.subject, text, spans.get(claim.subject.id))
    if claim.relation == "ADDRESSED_BY" and EXAMPLES_LEAD.search(heading):
        return "an item of a list of examples, not a remedy"
    if claim.relation == "ADDRESSED_BY" and isinstance(claim.object, EntityRef):
        return _remedy_unstated(claim.object.id, text, spans.get(claim.object.id), spans.get(claim.subject.id), headed)
    if claim.relation in ("REQUIRES", "FORBIDDEN_WHEN") and isinstance(claim.object, Condition):
        return _condition_unstated(text, spans.get(claim.subject.id))
    if claim.relation == "DETECTED_BY" and RESULT.search(text):
        return "a result, not a threshold"
    return ""


def _about_measuring(text: str, mention: Mention | None, heading: str) -> bool:
    """The sentence (outside the step's own name: "interleaving" alone is no timing) or its heading path speaks of
    measuring, timing or checking results."""
    rest = text if mention is None else text[:mention.start] + " " + text[mention.end:]
    return any(p.search(rest) for p in (MEASURE, TIMING, CHECKING)) or any(
        p.search(heading) for p in (MEASURE, MEASURE_HEADING, CHECKING))


def is_code(text: str) -> bool:
    """A line of code rather than prose: a statement's shape, or more code marks than words."""
    prose = MATH.sub(" ", text)
    return bool(CODE_LINE.search(prose)) or len(CODE_MARKS.findall(prose)) > 0.5 * max(len(prose.split()), 1)


def in_series(text: str, start: int, end: int) -> bool:
    """The name at text[start:end] is an example ("such as X") or one item of a series of three or more."""
    before, after = text[max(0, start - 60):start], text[end:]
    if EXAMPLE_BEFORE.search(before):
        return True
    return bool(ITEMS_AFTER.match(after) or ITEMS_BEFORE.search(before))


def in_identifier(text: str, start: int, end: int) -> bool:
    """The name is part of a longer identifier, call or path ("tl.math.fast_expf", "T.Pipelined(...)")."""
    joined_before = start > 0 and re.match(r"[\w.]", text[start - 1]) is not None
    return joined_before or re.match(r"\(|[._]\w", text[end:end + 2]) is not None


# A name that joins two things, or a training method: no one technique for kernels
TWO_THINGS = re.compile(r"\s(?:and|&)\s", re.I)
TRAINING = re.compile(r"\btrain(?:ing|ed)\b", re.I)
VERB_OR_ADVERB_FIRST = re.compile(r"^(?:\w+ly|use|avoid|add|apply|reduce|increase|manually|try)\b", re.I)
# Advice in the imperative ("Optimize the bottleneck", "Consider tiling strategies"): what to do, not a named thing
IMPERATIVE_FIRST = re.compile(r"^(?:consider|optimi[sz]e|focus|make sure|ensure|remember|keep|check|prefer|always|never|"
                              r"don[’']t|do not)\b", re.I)


# learned-12: a name whose head is a category in the plural ("FlashInfer supports two timing methods:", "TS supports
# three main scheduling shapes:") names a group the text goes on to list, not one method.
CATEGORY = re.compile(r"\b(?:methods|shapes|types|modes|kinds|strategies|techniques|options|approaches|ways|variants|"
                      r"categories|classes|flavou?rs|styles)$", re.I)
# learned-12: a name whose head is a piece of software ("using the SHARK Tuner can provide meaningful speedup") names
# the tool that applies a method, not the method (judged wrong on heldout13 and earlier halves: systems and libraries).
TOOL = re.compile(r"\b(?:tuners?|profilers?|compilers?|debuggers?|analy[sz]ers?|sanitizers?|frameworks?|toolkits?|"
                  r"toolchains?|sdks?|runtimes?|librar(?:y|ies)|packages?|tools?|suites?|clis?|plugins?|extensions?|"
                  r"utilit(?:y|ies)|dashboards?|simulators?|emulators?)$", re.I)
# A name in a product's brand case, lower-case letters before capitals ("xFormers", "cuBLAS", "vLLM"), names a library.
BRAND = re.compile(r"^[a-z]{1,5}[A-Z]")


def _proposal_unnamed(node: EntityRef) -> str:
    """Why a proposed node's name names no one new thing; "" when it may."""
    name = node.name.strip()
    if IDENTIFIER.search(name):
        return "a proposal named like an identifier"
    if TWO_THINGS.search(name):
        return "a proposal naming two things"
    if TRAINING.search(name):
        return "a training method, not a kernel technique"
    if node.kind == "Bottleneck" and VERB_OR_ADVERB_FIRST.match(name):
        return "a remedy proposed as a bottleneck"
    if IMPERATIVE_FIRST.match(name):
        return "advice in the imperative, not a named thing"
    if node.kind == "ProtocolStep" and len(name.split()) == 1 and name.islower():
        return "one common word proposed as a protocol step"
    if CATEGORY.search(name):
        return "a category of things, not one"
    if node.kind == "Technique" and (TOOL.search(name) or BRAND.match(name)):
        return "a tool named as a technique"
    return ""


def _evidence_unstated(node: EntityRef, text: str, mention: Mention | None) -> str:
    if is_lead_line(text):
        return "a lead line: what follows it states, not the line"
    if node.kind in ("Technique", "Bottleneck") and DESCRIBES_SAMPLE.search(text):
        return "what an example or a sample is"
    if node.kind == "Technique" and EXTENDING.search(text):
        return "how to extend a tool, not what the technique does"
    if mention is None:
        return ""  # linked by its heading or by meaning: the rules' bars decide
    if INTRODUCES_CODE.search(text):
        return "a lead line introducing code"
    if SUPPORT_NOTE.search(text):
        return "a note on what is supported"
    if len(BULLETS.findall(text)) >= 2:
        return "named in passing, in a list of bullets"
    if node.kind == "ProtocolStep":
        return ""  # measurement advice lists what to watch: "monitor the clocks, power and temperature"
    if in_series(text, mention.start, mention.end):
        return "named in passing, in a series"
    if in_identifier(text, mention.start, mention.end):
        return "named in code"
    if node.kind == "Technique" and BASELINE_BEFORE.search(text[:mention.start]):
        return "named as the baseline of a comparison"
    if NOT_USED_BEFORE.search(text[max(0, mention.start - 60):mention.start]) or NOT_AVAILABLE_AFTER.match(text[mention.end:]):
        return "named as what is not used or not available"
    if node.kind == "Bottleneck" and not BOUND_WORDS.search(text[:mention.start] + " " + text[mention.end:]):
        if MERIT_WORDS.search(text[:mention.start]):
            return "a figure of merit"
        if CHANGED_QUANTITY.search(text[:mention.start]) and QUANTITY.search(text[mention.start:mention.end]):
            return "the quantity a change acts on"
        if MEASURED.search(text) and RESULT.search(text):
            return "a measured result"
    return ""


def _remedy_unstated(technique_id: str, text: str, technique: Mention | None, bottleneck: Mention | None,
                     headed: frozenset[str]) -> str:
    if technique is None:
        if technique_id not in headed:
            return "the remedy's technique is not named"  # by the sentence, its list item's label nor a heading above it
        if not (REMEDY.search(text) or PURPOSE.search(text) or AVOIDING.search(text) or WHEN_TO_APPLY.search(text)
                or EXPECTED.search(text) or _states_problem(text, bottleneck)):
            return "the heading's technique, and the sentence says nothing of a remedy"
    if DEFAULT_VALUE.search(text):
        return "a default setting"
    if technique is None:
        return ""
    # learned-15: "It does not measure latency, occupancy, memory coalescing, bank conflicts, or pipeline overlap"
    if bottleneck is not None and in_series(text, technique.start, technique.end) and in_series(
            text, bottleneck.start, bottleneck.end):
        return "both named in passing, in one series"
    if bottleneck is not None and technique.end <= bottleneck.start and MEANS.search(text, technique.end, bottleneck.start):
        return "the bottleneck's reduction is the means"
    if bottleneck is not None and _owned(text, bottleneck, technique):
        return "the bottleneck is the technique's own"
    if MEANS.match(text, technique.end + 1):
        return "the technique is the goal, not the means"  # "maximize occupancy by minimizing registers"
    if CONDITION_BEFORE.search(text[:technique.start]) and CONDITION_AFTER.match(text[technique.end:]):
        return "the technique is a condition"
    return ""


def _owned(text: str, bottleneck: Mention, technique: Mention) -> bool:
    """The bottleneck is named as the technique's own: "of" and the technique's name as the sentence writes it follow it
    ("low tensor core utilization of Flash Attention"), wherever else the sentence names the technique."""
    name = re.escape(text[technique.start:technique.end])
    return re.match(rf"{OWNED_BY}{name}(?!\w)", text[bottleneck.end:], re.I) is not None


def _states_problem(text: str, bottleneck: Mention | None) -> bool:
    """The sentence names the bottleneck as the problem its section's technique answers ("this under-utilizes each
    SM", "memory throughput will be the bottleneck"), not as a cost the technique brings ("larger unroll factors may
    lead to register pressure": a cause word before the bottleneck), nor in a figure ("occupancy is limited to 2 waves",
    "memory-bound operations account for 0.02% of the FLOPs": a measurement, whatever section it sits in)."""
    return bottleneck is not None and not CAUSE.search(text[:bottleneck.start]) and not FIGURES.search(text)


def _condition_unstated(text: str, technique: Mention | None) -> str:
    if BUILD.search(text):
        return "a build instruction"
    if OBLIGATION.search(text):
        return "an obligation, not a precondition"
    if technique is not None and (in_series(text, technique.start, technique.end) or in_brackets(text, technique.start)):
        return "the technique named in passing"
    return ""
