"""Deciding what a sentence says about the nodes it links: remedy, cause, precondition, detection,
measured gain, measurement advice, or plain evidence that explains a node.

A sentence is seen with its context (`SentenceView`): the nodes it names, the nodes its section
headings name, the nodes the previous sentence named, and what its passage is about by meaning.
Each possible claim is scored from several signals (who is named where, cue words, heading
structure, meaning) and kept when the score reaches the claim's bar; no single cue is required.
Only sentences that can state something (`is_statement`) are ever quoted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from kskill.graph_schema.model import Condition

from .claims import Claim, EntityRef, Span
from .lexicon import Mention
from .linking import SIDE_ABOUT, EntityLinker, PassageLinks
from .tables import figures as row_figures, measured_subjects, speedup_owner, speedups

REMEDY = re.compile(
    r"\b(?:avoid\w*|reduc\w+|minimi[sz]\w+|eliminat\w+|prevent\w*|mitigat\w+|hid(?:e|es|ing)|fix\w*|remov\w+|solv\w+|"
    r"alleviat\w+|overcom\w+|cut\w*|lower\w*|address\w*|tackl\w+|mask\w*|amortiz\w+|overlap\w*|improv\w+|"
    r"boost\w*|increas\w+ (?:the )?(?:throughput|bandwidth|utili[sz]ation|occupancy|parallelism|reuse)|"
    r"(?:conflict|divergence|spill)[- ]free|speeds? up|faster|better|helps?|key|critical|essential|"
    r"mitigate|instead|solution|to the rescue|outperform\w*|"
    r"effective (?:strategy|way|technique|method|approach|optimi[sz]ation))\b", re.I)
PURPOSE = re.compile(r"\b(?:to (?:avoid|reduce|hide|prevent|eliminate|mitigate|minimi[sz]e|fix|remove|cut|address)|"
                     r"in order to|so that|can be (?:avoided|reduced|hidden|eliminated|mitigated|fixed|removed) "
                     r"(?:by|with|using|through))\b", re.I)
# A sentence that opens by telling the reader to apply something: "(use __launch_bounds__ to ...".
IMPERATIVE = re.compile(r"^[\W\d]*(?:use|apply|enable|prefer|try|consider|add)\b", re.I)
# "When to apply: ..." under a technique's heading: what follows is what the technique is for.
WHEN_TO_APPLY = re.compile(r"\b(?:when to (?:apply|use)|(?:use|apply) (?:it|this|them) when)\b", re.I)
APPLY = re.compile(r"\b(?:use[sd]?|using|apply|applie[sd]|enabl\w+|employ\w*|adopt\w*|consider|try|prefer\w*|"
                   r"recommend\w*|should|leverag\w+|introduc\w+|implement\w*)\b", re.I)
CAUSE = re.compile(r"\b(?:caus\w+|leads? to|results? in|increas\w+|introduc\w+|adds?|at the cost of|higher|more|"
                   r"trade\w*|worsen\w*|due to|because of|tighter)\b", re.I)
# "Don't store the attention matrix": an imperative that avoids something is a remedy, not a negation.
AVOIDING = re.compile(r"\b(?:don[’']?t|do not|never|avoid|without) (?:\w+ )?(?:stor\w+|materiali[sz]\w+|writ\w+|"
                      r"re-?read\w*|launch\w*|spill\w*|sync\w*|allocat\w+|copy\w*|round[- ]trip\w*)\b", re.I)
# A heading that gathers remedies: "Memory-bound optimizations", "How to avoid bank conflicts".
CATALOG = re.compile(r"\b(?:optimi[sz]ations?|techniques|strategies|remedies|fixes|solutions|mitigations?|"
                     r"how to (?:fix|avoid|reduce|hide|overcome|remove|eliminate)|what to do)\b", re.I)
# What a technique costs ("trades memory for compute", "Risks: ..."): a sentence saying only this is no remedy.
COST = re.compile(r"\b(?:at the cost of|at the expense of|trades?\b|trade-?offs?|drawbacks?|downsides?|risks?|"
                  r"penalt\w+|caveats?)\b", re.I)
# learned-30: what a section's technique makes worse is its cost: "reducing occupancy" lowers something wanted
# ("Increasing register usage means ... fewer waves per SIMD, effectively reducing occupancy", under "Register
# tiling"), and a way out the sentence calls detrimental is none ("... by using scratch memory instead, which is
# detrimental to performance", under "GMEM double buffering")
WORSENED = re.compile(r"\b(?:reduc\w+|lower\w*|decreas\w+|limit\w*|hurt\w*|hamper\w*)\s+(?:the\s+|its\s+|our\s+)?"
                      r"(?:achieved\s+|effective\s+|overall\s+)?(?:occupancy|parallelism|throughput|bandwidth|"
                      r"utili[sz]ation|reuse|hit rates?|performance|concurrency)\b"
                      r"|\b(?:detrimental|harmful|counter-?productive)\b", re.I)
NEGATION = re.compile(r"\b(?:not|no|never|cannot|can't|doesn't|don't|won't|neither|nor|without)\b", re.I)
DEFINITION = re.compile(r"\b(?:is called|is known as|refers? to|occurs? when|happens? when|means|is when|is a "
                        r"(?:technique|method|way|feature)|this is|which is|are serialized|serializ\w+|stall\w*|"
                        r"bottleneck\w*|limit\w*|wast\w+|idle|underutili[sz]\w+|slow\w*|cost\w*)\b", re.I)
# Advice: what the text recommends doing.
ADVICE = re.compile(r"\b(?:suggest\w*|recommend\w*|should|must|best|optimal|prefer\w*|ensure|important)\b", re.I)
# Sentences that point elsewhere or template text: never evidence.
POINTER = re.compile(r"^(?:how to\b|see\b|you can see|check out|there are (?:a few|several|many)|for more|refer|"
                     r"please refer|click|read more|more examples|\(?(?:graphic|figure|fig\.|image|picture|diagram|"
                     r"source|credit)s?\b)|\{[^}]*/[^}]*\}|\?\s*\)?\s*$", re.I)
# Words that tie a sentence to timing itself, needed when only meaning links it to a protocol step.
TIMING = re.compile(r"\b(?:tim(?:e|es|ed|ing|er)|clocks?|caches?|l2|iterations?|warm\w*|cold|flush\w*|repetitions?|"
                    r"median|varian\w+|variation|trials?|samples?)\b", re.I)
SPEEDUP_FIGURE = re.compile(r"\d+(?:\.\d+)?\s*(?:x|×|%)(?!\w)")
MEASURE = re.compile(r"\b(?:measur\w+|benchmark\w*|tim(?:e|es|ed|ing)|profil\w+|iterations?|warm\w*|clocks?|"
                     r"frequenc\w+|cold|variation|reproducib\w+|stabl\w+|runtime|latenc\w+ of the kernel)\b", re.I)
MEASURE_HEADING = re.compile(r"\b(?:benchmark\w*|measur\w+|methodolog\w+|timing|warm[- ]?ups?|profiling iterations)\b",
                             re.I)
REQUIRE = re.compile(r"\b(?:only (?:if|when|for|with|on)|only (?:beneficial|useful|worth it|helps?) (?:if|when|for)|"
                     r"requires?|required|needs?|must (?:have|be)|applies (?:only )?(?:to|when)|works (?:only )?"
                     r"(?:when|for|with)|prerequisite|provided that)\b", re.I)
ONLY_WHEN = re.compile(r"\bonly (?:beneficial |useful |worth it |helps? )?(?:if|when|for|with|on)\b", re.I)
FORBID = re.compile(r"\b(?:avoid (?:\w+ ){0,4}(?:when|if|for|on|with)|do not use|don't use|never use|"
                    r"(?:hurts?|slower|harmful|counterproductive|not (?:worth|beneficial|helpful)) (?:\w+ ){0,3}"
                    r"(?:when|if|for|on|with)|does not help (?:when|if|for|on|with)|breaks? (?:when|if|for|on|with))\b", re.I)
# learned-22: a percentage before a noun of gain, "a 4.4% performance increase", "a 12% throughput improvement", is the
# factor 1 + p/100, as "22.9% speedup" is.
GAIN = re.compile(
    r"(?<![\w.])(\d+(?:\.\d+)?)\s*(?:x|×)(?:\s+(?:faster|speed-?up|improvement|higher throughput|better))?(?!\w|\s+(?:slower|longer|cheaper|smaller|fewer|less|larger|bigger))"
    r"|(?:speed-?up|improvement) of (?:up to |about |~)?(\d+(?:\.\d+)?)\s*(?:x|×)"
    r"|(?<![\w.])(\d{1,3}(?:\.\d+)?)\s*%\s*(?:faster|speed-?up|higher throughput|improvement|better performance|"
    r"increase in (?:throughput|performance|speed)|(?:performance|throughput|speed) (?:increase|improvement|gain|boost|"
    r"uplift)|(?:performance )?uplift)", re.I)
# learned-21: a percentage a verb of speed takes, "improved 16384 by 5.70%", "can run faster by 2%", "outperform ... by
# up to 40%", "increase throughput by more than 20%", or a signed one beside a mean of speedups, "+50.06% geomean". A
# percentage gain of speed or throughput p% is the factor 1 + p/100: "p% faster" says the new rate is (1 + p/100)
# times the old (the reading "22.9% speedup" already had), and the text's own ratios agree (0.394 ms -> 0.346 ms
# printed as "+14%"). What is improved by the percentage must not be another quantity: memory, accuracy, a hit rate.
PERCENT_SPEEDUP = re.compile(
    r"\b(?:improv(?:e|es|ed|ing)|speeds? up|sped up|accelerat(?:e|es|ed|ing)|boost(?:s|ed)?|faster|outperform\w*|"
    r"increas\w+ (?:the )?(?:[\w-]+ )?(?:throughput|performance|speed))\b"
    r"(?P<what>[^.;:,%]{0,40}?)\bby (?:up to |about |around |roughly |nearly |almost |over |more than |~\s*)?"
    r"(?P<p>\d{1,3}(?:\.\d+)?)\s*%"
    r"|(?<![\w.])\+\s*(?P<signed>\d{1,3}(?:\.\d+)?)\s*%\s*(?:geo-?mean|geometric mean|speed-?up)", re.I)
# A percentage cut of a time is the factor 1 / (1 - p/100): the same work in (1 - p/100) of the time ("reduces the
# latency by 50%" is 2x, not 1.5x); only below 100%.
PERCENT_TIME_CUT = re.compile(
    r"\b(?:reduc\w+|cut(?:s|ting)?|lower\w*|decreas\w+|shorten\w*) (?:the )?(?:[\w-]+ ){0,2}?(?:latency|"
    r"run-?time|execution time|step time|iteration time|wall-?clock time|time)\b by (?:up to |about |around |~\s*)?"
    r"(?P<p>\d{1,2}(?:\.\d+)?)\s*%"
    r"|(?<![\w.])(?P<q>\d{1,2}(?:\.\d+)?)\s*% (?:lower|less|shorter|reduction in|decrease in) (?:the )?"
    r"(?:[\w-]+ )?(?:latency|run-?time|execution time|step time|iteration time|time)\b", re.I)
# learned-21: a factor in words or with "times", "7.93 times faster", "five times faster", "twice as fast".
TIMES_FASTER = re.compile(r"(?<![\w.])(?P<n>\d+(?:\.\d+)?|two|three|four|five|six|seven|eight|nine|ten|twelve|"
                          r"fifteen|twenty|fifty|hundred)\s+times\s+(?:faster|quicker|the (?:speed|throughput))\b"
                          r"|\b(?P<twice>twice) as fast\b", re.I)
NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
                "twelve": 12, "fifteen": 15, "twenty": 20, "fifty": 50, "hundred": 100, "twice": 2}
# learned-21: two timings of one piece of work, before and after: "goes from 260 µs to 70 µs", "676.4ms -> 16.7ms",
# "takes about 50 µs ... when executed normally, but only 16 µs when it is launched as a graph". The factor is the
# first time over the second (the same work in less time); only a fall counts (a time that rises is no gain).
TIME_UNIT = r"(?:ns|us|µs|μs|ms|s|secs?|seconds?|milliseconds?|microseconds?|nanoseconds?)"
_TIME = r"~?\s*(?P<{0}>\d+(?:\.\d+)?)\s*(?P<{0}u>" + TIME_UNIT + r")?(?![\w/])"
TIME_PAIR = re.compile(
    r"\bfrom (?:about |around |roughly )?" + _TIME.format("a") + r" (?:down )?to (?:about |around |just |only )?"
    + _TIME.format("b")
    + r"|(?<![\w.])" + _TIME.format("c") + r"\s*(?:->|→|=>)\s*" + _TIME.format("d")
    + r"|(?<![\w.])" + _TIME.format("e") + r"[^.;]{0,80}?\bbut (?:only|just) (?:about )?" + _TIME.format("f"), re.I)
SECONDS = {"ns": 1e-9, "nanosecond": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "microsecond": 1e-6, "ms": 1e-3,
           "millisecond": 1e-3, "s": 1.0, "sec": 1.0, "second": 1.0}
# A sentence that illustrates the one before it.
EXAMPLE = re.compile(r"^\W*(?:for (?:example|instance)|e\.g\.|as an example)\b", re.I)
# What a percentage improves when it is no speed: "improves memory usage by 30%", "boosts accuracy by 2%".
NOT_SPEED = re.compile(r"\b(?:memory|accuracy|perplexity|loss|size|footprint|usage|quality|scores?|utili[sz]ation|"
                       r"occupancy|efficiency|hit rates?|ratio|power|energy|costs?|precision|capacity)\b", re.I)
# The low end of a range of factors, "5-9x faster" (the high end is a GAIN match of its own); "2.1-fold improvement".
RANGE_LOW = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(?:-|–|to)\s*\d+(?:\.\d+)?\s*(?:x|×)"
                       r"(?!\w|\s+(?:slower|longer|cheaper|smaller|fewer|less|larger|bigger))", re.I)
CLAUSE_BREAK = re.compile(r";|\b(?:while|whereas|but)\b", re.I)
BRACKETED = re.compile(r"\(\s*(?:~|about\s+)?(\d+(?:\.\d+)?)\s*(?:x|×)\s*\)", re.I)  # "(1.41x)"
FOLD = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)[- ]fold\b", re.I)
# The technique is named inside the comparison's baseline phrase (up to the clause's end): "compared to the unfused
# style using cuBLAS, we improve 1.5x" states nothing of cuBLAS, nor its gain
BASELINE_BEFORE = re.compile(r"\b(?:compared (?:to|with)|relative to|than|versus|vs\.?)\b[^,.;:]*$", re.I)
GAIN_CONTEXT = re.compile(r"faster|speed-?up|speeds? up|improv|gain|throughput|better|performance|outperform|"
                          r"(?:reduc\w+|lower\w*|cut\w*|decreas\w+)\s+(?:the\s+)?(?:[\w-]+\s+)?(?:latency|run-?time|"
                          r"execution time)", re.I)
FIGURE = re.compile(r"(?:(?:up to|about|around|over|at least|~)\s*)?\d+(?:\.\d+)?\s*(?:x|×|%|[KMG]i?B\b|GB/s|TB/s|"
                    r"T?FLOPS|TFlops|cycles|stages?|regs?|registers|threads|warps|bytes|ms|us|µs)(?!\w)", re.I)
THRESHOLD = re.compile(r"(?P<phrase>[A-Za-z][A-Za-z0-9 /_-]{2,40}?)\s*(?P<op>>=|<=|>|<|≥|≤|above|below|over|under|"
                       r"more than|less than|at least|at most)\s*(?P<value>\d+(?:\.\d+)?)\s*(?P<pct>%)?", re.I)
OPS = {">=": ">=", "<=": "<=", ">": ">", "<": "<", "≥": ">=", "≤": "<=", "above": ">", "over": ">", "more than": ">",
       "at least": ">=", "below": "<", "under": "<", "less than": "<", "at most": "<="}

# Preconditions the metric vocabulary can state, recognised by phrase.
CONDITION_PHRASES: tuple[tuple[re.Pattern[str], Condition], ...] = tuple(
    (re.compile(pattern, re.I), cond) for pattern, cond in (
        (r"\bmemory[- ]bound", Condition.of("memory_bound", "is_true")),
        (r"\bcompute[- ]bound", Condition.of("compute_bound", "is_true")),
        (r"\b(?:fp16|bf16|half[- ]precision|float16|bfloat16|16-bit float)", Condition.of("dtype", "in", ["float16", "bfloat16"])),
        (r"\b(?:fp32|float32|single[- ]precision)\b", Condition.of("dtype", "==", "float32")),
        (r"\bstatic (?:shapes?|sizes?)\b|shapes? (?:are|is) (?:fixed|known)", Condition.of("static_shapes", "is_true")),
        (r"\b(?:gemms?|matmuls?|matrix multiplications?)\b", Condition.of("has_gemm", "is_true")),
        (r"\bconvolutions?\b", Condition.of("has_convolution", "is_true")),
        (r"\breductions?\b", Condition.of("has_reduction", "is_true")),
        (r"\bsoftmax\b", Condition.of("has_softmax", "is_true")),
        (r"\battention\b", Condition.of("has_attention", "is_true")),
        (r"\b(?:layer ?norm|rms ?norm|normali[sz]ation)\b", Condition.of("has_normalization", "is_true")),
        (r"\bbatch ?norm\w* (?:in )?training|training[- ]mode batch ?norm", Condition.of("batchnorm_training", "is_true")),
    ))

PREFACE = re.compile(r"\b(?:introduction|overview|outline|contents|summary|references|news|acknowledg\w*)\b", re.I)

EDGE_BAR = 0.6  # the score a remedy (ADDRESSED_BY) must reach
EVIDENCE_BAR = 0.55  # the score plain evidence for one node must reach


@dataclass(frozen=True)
class SentenceView:
    """A sentence and its context, as the claim rules see it."""

    text: str
    span: Span
    named: list[Mention]  # nodes the sentence names, in order
    headings: list[list[Mention]]  # nodes each enclosing heading names, innermost first
    previous: list[Mention]  # nodes the previous sentence of the passage named
    about: PassageLinks  # what the passage is about by meaning
    heading_text: str  # the heading path, outermost first
    # nodes the label of the list item holding the sentence names ("- **Fine-grained TMA copy - GEMM pipelining:** ...")
    label: list[Mention] = field(default_factory=list)
    # the line ending in a colon that opens the list holding the sentence ("For stable and reliable performance
    # measurements:" above "2. Execute multiple timed iterations ..."): context for each item, as a heading is
    lead: str = ""
    # the header cells of the table whose row the sentence is (tables.py): what each of its cells is
    header: tuple[str, ...] = ()

    @property
    def context_text(self) -> str:
        """The heading path and, for a list item, the list's lead line."""
        return " > ".join(filter(None, (self.heading_text, self.lead)))

    @property
    def heading(self) -> str:
        """The innermost heading: an "Overview" above a detailed section does not make it a preface."""
        return self.heading_text.rsplit(" > ", 1)[-1]

    def of_kind(self, kind: str) -> list[Mention]:
        return [m for m in self.named if m.kind == kind]

    def from_heading(self, kind: str) -> Mention | None:
        """The one node of `kind` the nearest heading naming any names."""
        for mentions in self.headings:
            named = [m for m in mentions if m.kind == kind]
            if named:
                return named[0] if len(named) == 1 else None
        return None


class ClaimRules:
    """Turns sentence views into claims; `linker` resolves metric phrases and knows node kinds."""

    def __init__(self, linker: EntityLinker, extractor: str = "rules", edge_bar: float = EDGE_BAR,
                 evidence_bar: float = EVIDENCE_BAR):
        """`edge_bar` and `evidence_bar`: the scores a remedy and plain evidence must reach; a learned scorer
        lowers them to see more candidates and decides itself which to keep."""
        self.linker = linker
        self.extractor = extractor
        self.edge_bar = edge_bar
        self.evidence_bar = evidence_bar
        # Below the rules' own bars the rules only propose candidates for a scorer: then they also propose
        # what the rules alone would never keep (nodes met by meaning or by heading only, protocol steps
        # named outside a measurement context), and the scorer weighs them.
        self.broad = evidence_bar < EVIDENCE_BAR

    def claims(self, view: SentenceView) -> list[Claim]:
        if POINTER.search(view.text):
            return []
        thresholds = [(m.start(), m.end()) for m in THRESHOLD.finditer(view.text)]
        if thresholds:  # a name inside a threshold ("memory throughput < 40%") is the metric, not a node meant
            view = replace(view, named=[m for m in view.named if not any(a <= m.start < b for a, b in thresholds)])
        figures = tuple(dict.fromkeys([m.group(0).strip() for m in FIGURE.finditer(view.text)]
                                      + list(row_figures(view.text, view.header))))
        measuring = self._measurement_context(view)
        out = self._measurement(view, measuring)
        out += self._conditions(view) + self._detection(view) + self._gains(view)
        if not measuring:  # measurement advice is never read as a kernel optimization
            out += self._remedies(view)
            out += self._evidence(view, _ids(out))
        if self.broad:
            out += self._weak_candidates(view, measuring, _ids(out))
        return [_with_figures(c, figures) for c in out]

    def _weak_candidates(self, view: SentenceView, measuring: bool, claimed: set[str]) -> list[Claim]:
        """Evidence the rules' bars would not reach, for the scorer to weigh: a protocol step named outside a
        measurement context, the passage's first topic by meaning or the heading's node when the sentence
        uses its jargon or a cue word, and a protocol step the passage is about by meaning."""
        out = []
        for m in view.of_kind("ProtocolStep"):
            if m.id not in claimed:
                out.append(self._claim(EntityRef("ProtocolStep", m.id), "SUPPORTS", None, 0.35, view, "measurement"))
        cue = DEFINITION.search(view.text) or REMEDY.search(view.text) or CAUSE.search(view.text)
        for kind in ("Bottleneck", "Technique"):
            for node_id in (view.about.top(self.linker.kind_of, kind), getattr(view.from_heading(kind), "id", None)):
                if node_id and node_id not in claimed and (cue or self.linker.shares_concepts(view.text, node_id)):
                    claimed = claimed | {node_id}
                    out.append(self._claim(EntityRef(kind, node_id), "SUPPORTS", None, 0.3, view, ""))
        if not measuring and view.about.protocol and TIMING.search(view.text):
            best = max(view.about.protocol, key=view.about.protocol.get)
            if best not in claimed and view.about.protocol[best] >= SIDE_ABOUT - 0.05:
                out.append(self._claim(EntityRef("ProtocolStep", best), "SUPPORTS", None, 0.3, view, "measurement"))
        return out

    # --- measurement advice ------------------------------------------------------------------

    def _measurement_context(self, view: SentenceView) -> bool:
        """The sentence is about measuring: under a measurement heading (or a list's lead line) and using measurement
        words, or naming a protocol step while saying something else about timing ("run warm-up iterations before
        timing")."""
        if MEASURE_HEADING.search(view.context_text) and MEASURE.search(view.text):
            return True
        steps = view.of_kind("ProtocolStep")
        if not steps:
            return False
        rest = "".join(" " if any(m.start <= i < m.end for m in steps) else ch for i, ch in enumerate(view.text))
        return TIMING.search(rest) is not None or MEASURE.search(rest) is not None

    def _measurement(self, view: SentenceView, measuring: bool) -> list[Claim]:
        if not measuring:
            return []
        steps = {m.id: 0.65 + (0.1 if m.exact else 0.0) for m in view.of_kind("ProtocolStep")}
        if measuring and not steps and view.about.protocol and TIMING.search(view.text):
            best = max(view.about.protocol, key=view.about.protocol.get)
            if view.about.protocol[best] >= SIDE_ABOUT:
                steps[best] = 0.55
        return [self._claim(EntityRef("ProtocolStep", i), "SUPPORTS", None, score, view, "measurement")
                for i, score in steps.items()]

    # --- remedies and causes -----------------------------------------------------------------

    def _remedies(self, view: SentenceView) -> list[Claim]:
        bottlenecks, b_inherited = self._side(view, "Bottleneck")
        techniques, t_inherited = self._side(view, "Technique")
        if not bottlenecks or not techniques:
            return []
        if b_inherited == t_inherited == "heading":
            return self._catalog(view, bottlenecks[0], techniques[0])
        if b_inherited and t_inherited:
            return []
        claims = []
        # A side borrowed from the previous sentence or from meaning is not stated by this sentence: such an
        # edge needs the rules' own bar even when weaker candidates are asked for.
        bar = EDGE_BAR if {b_inherited, t_inherited} & {"previous", "meaning"} else self.edge_bar
        for b in bottlenecks:
            for t in techniques:
                score, kind = self._remedy_score(view, b, t, b_inherited or t_inherited)
                if WHEN_TO_APPLY.search(view.text) and t_inherited in ("", "heading") and kind == "remedy":
                    score = min(score + 0.2, 0.95)
                if kind == "remedy" and score >= bar:
                    claims.append(self._claim(EntityRef("Bottleneck", b.id), "ADDRESSED_BY", EntityRef("Technique", t.id),
                                              score, view, "remedy", gain=_gain(view.text)))
                elif kind == "cause" and score >= bar:
                    claims.append(self._claim(EntityRef("Bottleneck", b.id), "SUPPORTS", None, score, view, "cause"))
        return claims

    def _catalog(self, view: SentenceView, b: Mention, t: Mention) -> list[Claim]:
        """A section on a technique inside a section of remedies for a bottleneck ("2. Memory-bound
        optimizations > 2.1 Coalescing"): a sentence there that advises or states a benefit says the
        technique addresses the bottleneck."""
        titles = view.heading_text.split(" > ")[::-1]  # innermost first, as view.headings
        b_level = next(i for i, named in enumerate(view.headings) if any(m.id == b.id for m in named))
        t_level = next(i for i, named in enumerate(view.headings) if any(m.id == t.id for m in named))
        if not (t_level < b_level < len(titles) and CATALOG.search(titles[b_level])):
            return []
        text = view.text
        if not (REMEDY.search(text) or ADVICE.search(text) or APPLY.search(text)) or COST.search(titles[0]):
            return []
        if NEGATION.search(text) and not AVOIDING.search(text):
            return []
        return [self._claim(EntityRef("Bottleneck", b.id), "ADDRESSED_BY", EntityRef("Technique", t.id), 0.6, view,
                            "remedy")]

    def _side(self, view: SentenceView, kind: str) -> tuple[list[Mention], str]:
        """The nodes of `kind` the claim is about: named in the sentence, else the heading's, else the
        previous sentence's (one each), else the passage's by meaning; where they were borrowed from
        ("heading", "previous", "meaning"), or "" when the sentence names them."""
        named = view.of_kind(kind)
        if named:
            return named, ""
        heading = view.from_heading(kind)
        if heading is not None:
            return [heading], "heading"
        previous = [m for m in view.previous if m.kind == kind]
        if len(previous) == 1:
            return previous, "previous"
        top = view.about.top(self.linker.kind_of, kind)
        return ([Mention(top, kind, 0, 0, False)], "meaning") if top else ([], "")

    def _remedy_score(self, view: SentenceView, b: Mention, t: Mention, inherited: str) -> tuple[float, str]:
        text = view.text
        if b.end and t.end and t.start < b.start and CAUSE.search(text[t.end:b.start]) and not PURPOSE.search(text):
            return 0.6 + (0.1 if b.exact else 0.0), "cause"  # "pipelining ... higher register pressure"
        if inherited == "heading" and WORSENED.search(text) and not PURPOSE.search(text):
            return 0.6 + (0.1 if b.exact else 0.0), "cause"  # the heading's technique, and what it makes worse
        # A heading that names one side makes it the section's topic ("Memory access as a bottleneck"):
        # as good as naming it; the previous sentence's node or the passage's by meaning is a guess.
        score = 0.3 if inherited in ("previous", "meaning") else 0.4
        if inherited == "meaning" and min(view.about.ranks(b.id), view.about.ranks(t.id)) > 0:
            score -= 0.1  # borrowed by meaning, and not even the passage's first topic
        score += 0.2 if PURPOSE.search(text) or AVOIDING.search(text) else 0.0
        score += 0.15 if t.end and (REMEDY.search(view.heading_text) or PURPOSE.search(view.heading_text)) else 0.0
        remedy = REMEDY.search(text)
        score += 0.15 if remedy else 0.0
        if remedy and b.end and t.end and min(b.start, t.start) <= remedy.start() <= max(b.start, t.start):
            score += 0.05
        score += 0.1 if APPLY.search(text) and inherited else 0.0
        imperative = IMPERATIVE.match(text)
        score += 0.15 if imperative and t.end and t.start < imperative.end() + 40 and not inherited else 0.0
        score += 0.05 if (b.exact or t.exact) else 0.0
        score += 0.05 if view.about.meaning.get(b.id, 0) or view.about.meaning.get(t.id, 0) else 0.0
        if (COST.search(text) or COST.search(view.heading)) and not (PURPOSE.search(text) or remedy):
            score -= 0.2
        if NEGATION.search(text) and not AVOIDING.search(text):
            score -= 0.25  # "does not avoid", "without fusion": often the opposite claim
        if len(view.of_kind("Bottleneck")) * len(view.of_kind("Technique")) > 2:
            score -= 0.1  # a list sentence: which pair is meant is a guess
        return round(min(score, 0.95), 2), "remedy"

    # --- plain evidence -----------------------------------------------------------------------

    def _evidence(self, view: SentenceView, claimed: set[str]) -> list[Claim]:
        """A sentence that explains a node it names (or its heading names) supports that node."""
        out = []
        cue = (DEFINITION.search(view.text) or REMEDY.search(view.text) or CAUSE.search(view.text)
               or ADVICE.search(view.text))
        candidates = {m.id: m for m in view.named if m.kind != "ProtocolStep"}
        measured = measured_subjects(view.text, view.header, view.named)  # a table row's subjects, learned-13
        for kind in ("Bottleneck", "Technique"):
            heading = view.from_heading(kind)
            if heading is not None and heading.id not in candidates:
                candidates[heading.id] = Mention(heading.id, kind, 0, 0, False)
        for node_id, m in candidates.items():
            if node_id in claimed:
                continue
            top = view.about.ranks(node_id) < 2
            shares = self.linker.shares_concepts(view.text, node_id)
            if m.end:  # named in the sentence
                # Without a cue word the sentence must be about the node in other ways (named first, the
                # passage's topic by meaning): "this chapter covers X and Y" names X in passing.
                # learned-13: a table row's subject with a figure under a header naming a measure is said of it
                said = cue or SPEEDUP_FIGURE.search(view.text) or m in measured
                if not said and view.text.count("|") >= 2:
                    continue  # a table row without a claim word nor a measured figure: cells, not a statement
                score = 0.45 + (0.05 if m.exact else 0.0) + (0.1 if said else -0.05) + (0.1 if top else 0.0)
                score += 0.05 if FIGURE.search(view.text) else 0.0
                score += 0.05 if m.start < 0.4 * len(view.text) else 0.0  # named early: what the sentence is about
                score -= 0.1 if len(view.named) >= 3 else 0.0  # a list names things in passing
                score -= 0.15 if PREFACE.search(view.heading) else 0.0
            elif (cue or FIGURE.search(view.text)) and (top or shares):  # named by the heading: it must say something
                score = 0.3 + (0.1 if top else 0.0) + (0.1 if shares else 0.0) + (0.1 if DEFINITION.search(view.text) else 0.0)
            else:
                continue
            if score >= self.evidence_bar:
                kind = "definition" if DEFINITION.search(view.text) else ""
                out.append(self._claim(EntityRef(m.kind, node_id), "SUPPORTS", None, round(min(score, 0.9), 2), view, kind))
        return out

    # --- preconditions and detection -------------------------------------------------------------

    def _conditions(self, view: SentenceView) -> list[Claim]:
        techniques, inherited = self._side(view, "Technique")
        forbid, require = FORBID.search(view.text), REQUIRE.search(view.text)
        if len(techniques) != 1 or not (forbid or require):
            return []
        if inherited and not ONLY_WHEN.search(view.text):
            return []  # "users who require full control ..." under a technique's heading states no precondition
        cue = forbid or require
        relation = "FORBIDDEN_WHEN" if forbid else "REQUIRES"
        claims = []
        names = [(m.start, m.end) for m in view.named if m.id == techniques[0].id]
        for pattern, cond in CONDITION_PHRASES:
            m = pattern.search(view.text, cue.start())
            if m and any(a <= m.start() < b for a, b in names):
                continue  # "flash-attention" names attention: the technique's own name is no precondition
            if m and m.start() - cue.end() < 60:
                claims.append(self._claim(EntityRef("Technique", techniques[0].id), relation, cond,
                                          0.55 if inherited else 0.65, view, "precondition"))
        return claims

    def _detection(self, view: SentenceView) -> list[Claim]:
        """"Memory throughput > 60% of peak" under a memory-bound heading: the bottleneck's signature."""
        thresholds = list(THRESHOLD.finditer(view.text))
        if not thresholds:
            return []
        bottlenecks, inherited = self._side(view, "Bottleneck")
        if len(bottlenecks) != 1:
            return []
        claims = []
        for m in thresholds:
            metric = self.linker.metric(_metric_phrase(m.group("phrase")))
            if metric is None:
                continue
            value = float(m.group("value"))
            cond = Condition.of(metric, OPS[m.group("op").lower()], int(value) if value.is_integer() else value)
            claims.append(self._claim(EntityRef("Bottleneck", bottlenecks[0].id), "DETECTED_BY", cond,
                                      0.6 if inherited else 0.7, view, "detection"))
        return claims

    def _gains(self, view: SentenceView) -> list[Claim]:
        """A speedup stated for the one technique the sentence names, unless inside the comparison's baseline; in a
        sentence naming none, for the technique its nearest heading names (a section on one technique states its
        results without repeating its name). Each factor a sentence naming the technique states is one claim
        (gains_of); a sentence naming none gives its heading's technique the first ("We obtain 1.3x and 1.9x speedups"
        under a kernel-fusion heading: both factors were of the whole system, tune material). A table row's factors
        under a speedup header are the gains of the one technique its subject cell names (learned-20)."""
        factors = speedups(view.text, view.header)
        if factors:  # under "Async TP speedup", a row's quantization mode is where it was measured, not what gains
            subjects = {m.id for m in measured_subjects(view.text, view.header, view.named) if m.kind == "Technique"}
            if len(subjects) != 1 or speedup_owner(view.header):
                return []
            subject = EntityRef("Technique", subjects.pop())
            return [self._claim(subject, "GAIN", None, 0.6, view, "gain", gain=g) for g in factors]
        gains = gains_of(view.text)
        techniques = view.of_kind("Technique")
        if not gains or len(techniques) > 1:
            return []
        heading = view.from_heading("Technique") if not techniques else None
        if heading is None and not techniques and EXAMPLE.match(view.text):
            # learned-21: "CUDA graphs solve this ... For example, an MLP takes about 50 µs ... but only 16 µs when it
            # is launched as a graph": an example illustrates the previous sentence's one technique
            earlier = {m.id for m in view.previous if m.kind == "Technique"}
            heading = Mention(earlier.pop(), "Technique", 0, 0, False) if len(earlier) == 1 else None
        if heading is not None:  # its first factor only: the others often measure the whole system, not the technique
            return [self._claim(EntityRef("Technique", heading.id), "GAIN", None, 0.55, view, "gain", gain=gains[0])]
        if len(techniques) != 1 or BASELINE_BEFORE.search(view.text[:techniques[0].start]):
            return []  # "compared to the unfused style using cuBLAS, we improve 1.5x": the baseline gains nothing
        return [self._claim(EntityRef("Technique", techniques[0].id), "GAIN", None, 0.6, view, "gain", gain=g)
                for g in gains]

    def _claim(self, subject: EntityRef, relation: str, obj, score: float, view: SentenceView, kind: str,
               gain: float | None = None) -> Claim:
        return Claim(subject, relation, obj, round(score, 2), view.span, self.extractor, gain=gain, kind=kind)


def heading_gains(sections, mentions, location, extractor: str = "rules") -> list[Claim]:
    """Speedups a section title states ("2.0: Complete rewrite, 2x faster"), each the gain of the one technique that
    title names, else the one its nearest enclosing title naming any names. `sections`: the document's sections in
    order (start, title, level); `mentions`: text -> node mentions; `location`: offset -> where a reader finds it."""
    out = []
    for i, section in enumerate(sections):
        gain = _gain(section.title)
        if gain is None:
            continue
        enclosing = [section]
        for earlier in reversed(sections[:i]):
            if earlier.level < enclosing[-1].level:
                enclosing.append(earlier)
        for title in enclosing:
            techniques = {m.id for m in mentions(title.title) if m.kind == "Technique"}
            if techniques:
                break
        if len(techniques) == 1:
            out.append(Claim(EntityRef("Technique", techniques.pop()), "GAIN", None, 0.6,
                             Span(section.title, location(section.start)), extractor, gain=gain, kind="gain",
                             signals=(("heading_stated", 1.0),)))
    return out


def _ids(claims: list[Claim]) -> set[str]:
    """The existing nodes the claims are about, either side."""
    return {c.subject.id for c in claims} | {c.object.id for c in claims if isinstance(c.object, EntityRef)}


def _with_figures(claim: Claim, figures: tuple[str, ...]) -> Claim:
    return replace(claim, figures=figures) if figures else claim


def _metric_phrase(phrase: str) -> str:
    """The words naming a metric before a comparison: "NCU: Memory throughput" -> "Memory throughput"."""
    words = re.split(r"[:,;(]", phrase)[-1].split()
    return " ".join(words[-4:])


def gain_of(text: str) -> float | None:
    return _gain(text)


def _gain(text: str) -> float | None:
    """The first speedup factor stated in the sentence: "2x faster", "speedup of 1.5x", "30% faster"."""
    found = gains_of(text)
    return found[0] if found else None


def gains_of(text: str) -> list[float]:
    """Every speedup factor the sentence states, in order and once each: a sentence of results often states several
    ("1.2x-1.4x higher throughput ... and 2.4x-3.5x", "8x/2x speedup", "5-9x faster", "a 2.1-fold improvement"); the
    low end of a range is a result as much as the high end. A factor past the first counts only when its own clause
    speaks of speed ("1.3x and 1.9x speedups while using 4x and 2x lower resources": the resources are no gain), and
    a factor in brackets after another name is that name's ("X reaches 1.61x, outperforming Y (1.41x)")."""
    if not GAIN_CONTEXT.search(text):
        return [v for _, v in _factors(text) if v is not None][:1]
    # the low end of a range after the matches (the first factor stays the high end, "5-9x" is a 9x claim first)
    found = _factors(text) + [(m.start(), float(m.group(1))) for pattern in (RANGE_LOW, FOLD)
                              for m in pattern.finditer(text)]
    values = [v for i, (at, v) in enumerate(found) if v is not None and 1.0 < v <= 100
              and (i == 0 or GAIN_CONTEXT.search(_clause(text, at)))]
    if len(values) > 1:
        aside = {float(m.group(1)) for m in BRACKETED.finditer(text)}
        values = [v for v in values if v not in aside] or values
    return [v for i, v in enumerate(values) if v not in values[:i]]


def _factors(text: str) -> list[tuple[int, float | None]]:
    """The GAIN matches of a sentence: where each starts, and its factor (None for "2x" in a sentence that does not
    speak of speed: as often a shape, "2x2 tiles", as a speedup); with learned-21's, in order: its percentages of speed
    (PERCENT_SPEEDUP), its percentage cuts of a time (PERCENT_TIME_CUT), its factors said with "times"
    (TIMES_FASTER) and, where it states none of these, the falls of its timings (TIME_PAIR)."""
    context = GAIN_CONTEXT.search(text) is not None
    out: list[tuple[int, float | None]] = []
    for m in GAIN.finditer(text):
        if m.group(1):
            out.append((m.start(), float(m.group(1)) if context else None))
        elif m.group(2):
            out.append((m.start(), float(m.group(2))))
        else:
            out.append((m.start(), round(1 + float(m.group(3)) / 100, 3)))
    for m in PERCENT_SPEEDUP.finditer(text):
        if m.group("signed"):
            out.append((m.start(), round(1 + float(m.group("signed")) / 100, 3)))
        elif not NOT_SPEED.search(m.group("what")):
            out.append((m.start("p"), round(1 + float(m.group("p")) / 100, 3)))
    for m in PERCENT_TIME_CUT.finditer(text):
        p = float(m.group("p") or m.group("q"))
        out.append((m.start(), round(1 / (1 - p / 100), 3)))
    for m in TIMES_FASTER.finditer(text):
        n = m.group("n") or m.group("twice")
        out.append((m.start(), float(NUMBER_WORDS.get(n.lower(), 0) or n)))
    if not out:  # "676.4ms -> 16.7ms => 40x speed up": the factor stated stands for its timings
        out = _time_falls(text)
    return sorted(out, key=lambda found: found[0])


def _time_falls(text: str) -> list[tuple[int, float]]:
    """The factors two timings of one piece of work state, before over after, where the time falls (TIME_PAIR); each
    timing needs its unit, or the second's stands for both ("from 120 to 40 us")."""
    out = []
    for m in TIME_PAIR.finditer(text):
        first, second = next((a, b) for a, b in ("ab", "cd", "ef") if m.group(a) is not None)
        unit_b = m.group(second + "u")
        unit_a = m.group(first + "u") or unit_b
        if not unit_b or (m.group(first + "u") is None and first == "e"):
            continue  # a bare number before "but only 16 µs" may be anything
        before = float(m.group(first)) * _seconds(unit_a)
        after = float(m.group(second)) * _seconds(unit_b)
        if after > 0 and 1.0 < before / after <= 100:  # beyond, a part of the work ("spin 600us -> 3us")
            out.append((m.start(), round(before / after, 3)))
    return out


def _seconds(unit: str) -> float:
    unit = unit.lower()
    return SECONDS.get(unit, SECONDS.get(unit.rstrip("s"), 1.0))


def _clause(text: str, at: int) -> str:
    """The clause of the sentence holding position `at`: clauses part at a semicolon, "while", "whereas", "but"."""
    bounds = [0, *(m.end() for m in CLAUSE_BREAK.finditer(text)), len(text)]
    start = max(b for b in bounds if b <= at)
    end = min((b for b in bounds if b > at), default=len(text))
    return text[start:end]
