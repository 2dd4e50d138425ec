"""Names a practitioner's advice gives: what it tells the reader to use, and what it tells the reader to avoid.

Performance tips are written as advice more than as named methods (eval/ingest/runs/advice-session48.md): a section
titled "Use Caching Memory Allocator" or "Avoid triggering Hostcalls", a sentence "Try to use single precision training
when possible, because most GPUs have poor double-precision performance", "Prefer recomputation over saving for
backward when computation is cheap", "Consider using FP16 if you're struggling with arithmetic throughput", or a cost
said with a modal ("which can be very slow", "Having a hostcall unnecessarily slows execution down"). What is advised
for is a Technique, what is advised against or said to slow things a Bottleneck. The advice must give a reason that is
about speed or cost (a style guide's "Prefer return values to output parameters" gives none, nor does "Prefer a unified
async-dependency verifier over isolated instruction-specific checks", a compiler's correctness check), and the name is
the noun phrase it advises, not the clause: "Avoid triggering Hostcalls" names "Hostcalls".

Each function returns (name, kind) pairs and leaves whether the graph has the name, and its support, to the proposal
finder (proposals.py). The patterns read sentence form only; none knows a document or a label.
"""

from __future__ import annotations

import re

from .claimants import PHRASE, PHRASE_WORD, RAISED, _names_something, _states_result

# The verbs whose object is the thing itself: "Avoid triggering Hostcalls" advises against hostcalls.
LIGHT_GERUND = r"(?:(?:triggering|using|calling|creating|launching|performing|issuing|doing|having|introducing|" \
               r"incurring|adding|making)\s+)"
ARTICLE = r"(?:(?:an?|the|any|unnecessary|excessive|too many|many)\s+)"
# Who or what recommends: "Try to use", "You should use", "It is suggested to use", "We recommend using".
ADVISER = (r"(?:(?:try to|always|you should|one should|it is (?:suggested|recommended|advised|advisable|best|better|"
           r"a good idea|preferable) to|we (?:recommend|suggest)(?: to)?(?: prioriti[sz]ing)?|(?:another|one|a common|"
           r"the best|a better|an alternative) (?:approach|option|way|solution|alternative) is to)\s+)")
# A purpose or a setting may open the advice: "To get good speedup with GPU, it is suggested to use ...".
LEAD_IN = r"(?:(?:to|for|on|in|with)\s[^,]{3,60},\s*)?"
# A name ends where code or a clause begins: "GPUArrays.@cached" is no name "GPUArrays", "FP16 if you're ..." is "FP16".
NAME_END = r"(?=[\s,;:)]|\.(?:\s|$)|$)(?<!\bif)(?<!\bwhen)(?<!\bunless)"
USE_TITLE = re.compile(rf"^\W*(?:use|prefer(?:\s+using)?|enable|adopt|switch to)\s+{ARTICLE}?({PHRASE})\s*$", re.I)
AVOID_TITLE = re.compile(rf"^\W*(?:avoid|minimi[sz]e|don[’']?t use|do not use|never use)\s+{LIGHT_GERUND}?{ARTICLE}?"
                         rf"({PHRASE})\s*$", re.I)
# "Try to use X", "It is suggested to use X", "Consider using X", "Prefer X": a plain "Use X" or "You can use X" is
# mostly a tool for a step ("Use the following commands to build UCX"), and "use X to lower a cost" is read by
# claimants.used_names.
USE_ADVICE = re.compile(rf"^\W*{LEAD_IN}(?:{ADVISER}(?:use|using|enable|switch to)|"
                        rf"consider (?:using|enabling|switching to)|prefer(?:\s+using)?)\s+{ARTICLE}?"
                        rf"`?({PHRASE}(?:\s+of\s+{PHRASE_WORD})?){NAME_END}`?", re.I)
AVOID_ADVICE = re.compile(rf"^\W*(?:(?:try to|always)\s+)?(?:avoid|don[’']?t use|do not use|never use)\s+"
                          rf"{LIGHT_GERUND}?{ARTICLE}?`?({PHRASE}){NAME_END}`?", re.I)
# Why the advice is given, about speed or cost: "because most GPUs have poor double-precision performance", "when
# computation is cheap", "if you're struggling with arithmetic throughput".
REASON = re.compile(r"\b(?:faster|slow\w*|speed\w*|performance|throughput|latency|overhead|expensive|costly|cost|"
                    r"cheap\w*|bandwidth|efficien\w+|stalls?|pressure|bottleneck|utili[sz]ation|occupancy|"
                    r"memory traffic|allocations?|synchroni[sz]\w+)\b", re.I)
# What follows the name when the advice is a version, an alternative in a list, or a setup step, not a method: "use
# CUDA >= 11.8", "using a Pascal or Maxwell generation GPU", "using pip to install NCCL", "the flags below".
NOT_A_METHOD = re.compile(r"^\s*(?:[<>=]|\d|v\d|version|or\b|and\b|(?:to|for)\s+(?:install|build|set up|setup|download|"
                          r"dump|print|see|view|navigate|get started|run on|run it))", re.I)
LISTING = re.compile(r"\b(?:below|above|following)\b", re.I)
# "slow", "very expensive": what the two cost patterns below say a thing is
SLOW = r"(?:(?:very|quite|extremely|rather|relatively|prohibitively|really)\s+)?(?:slow|expensive|costly)\b"
# A cost said with a modal or a verb of slowing: "which can be very slow", "Having a hostcall unnecessarily slows
# execution down", "X will be slow".
MODAL_COST = re.compile(rf"^\W*(?:having\s+)?{ARTICLE}?({PHRASE})\s+(?:(?:can|could|will|would|may|might)\s+be\s+"
                        rf"{SLOW}|(?:\w+ly\s+)?slows?\s+(?:[\w-]+\s+){{0,2}}?down\b)", re.I)

# A cost said of what a relative clause follows, the object of a verb of doing: "the code generator will emit atomic
# operations, which can be very slow" (not "... or the L2 cache, which are slower": no verb, a comparison).
WHICH_COST = re.compile(rf"\b(?:emits?|generates?|issues?|uses?|performs?|triggers?|launch(?:es)?|requires?|involves?)"
                        rf"\s+{ARTICLE}?({PHRASE}),?\s+which\s+(?:(?:can|could|may|might|will|would)\s+be|is|are)\s+"
                        rf"{SLOW}", re.I)


def advised_title(title: str, below: list[str]) -> tuple[str, str] | None:
    """The thing a section title advises using (a Technique) or avoiding (a Bottleneck), when a sentence under it
    gives a reason of speed or cost: "Use Caching Memory Allocator", "Avoid triggering Hostcalls"."""
    for pattern, kind in ((USE_TITLE, "Technique"), (AVOID_TITLE, "Bottleneck")):
        m = pattern.match(title)
        if m and _names_something(m.group(1)) and any(REASON.search(t) for t in below):
            return m.group(1), kind
    return None


def advised_names(text: str) -> list[tuple[str, str]]:
    """What a sentence advises using or avoiding, with a reason of speed or cost after it, and what it says can be
    slow: (name, kind) pairs."""
    out = []
    for pattern, kind in ((USE_ADVICE, "Technique"), (AVOID_ADVICE, "Bottleneck")):
        m = pattern.match(text)
        if m and _names_something(m.group(1)) and not (NOT_A_METHOD.match(text[m.end():])
                                                       or LISTING.search(m.group(1))):
            rest = text[:m.start(1)] + " " + text[m.end():]  # a reason may lead in or follow
            if REASON.search(rest) or _states_result(rest) or RAISED.search(rest):
                out.append((_clause_cut(m.group(1)), kind))
    for m in filter(None, (MODAL_COST.match(text), WHICH_COST.search(text))):
        # a cost a benefit outweighs is a trade-off of a method: "Gradient checkpointing slows things down ..., but
        # since it frees up a lot of memory, ... it actually improves the overall speed"
        if _names_something(m.group(1)) and not _states_result(text[m.end():]):
            out.append((m.group(1), "Bottleneck"))
    return out


def _clause_cut(name: str) -> str:
    """The name without a clause the phrase ran into: "FP16 if" is "FP16"."""
    name = re.sub(r"\s+(?:if|when|whenever|wherever|unless|because|since)\b.*$", "", name, flags=re.I)
    return re.sub(r"\s+(?:first|instead|everywhere)$", "", name, flags=re.I)
