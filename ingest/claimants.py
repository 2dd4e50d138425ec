"""Names a sentence gives to a method by what it says of it, not by how the document lays it out.

The proposal finder (proposals.py) reads names from titles, bold terms, capitalised introductions and a few head
nouns. Most of what experts expect a document to propose is named otherwise (eval/ingest/runs/candidates-session40.md):
- introduced in lower case: "This optimization, known as loop tiling, ...", "We call this a ping-pong scheduling
  pattern", "a type of copy kernel known as a "blit" kernel", or spelled out before an acronym: "cluster launch
  control (CLC)";
- named as the means of a benefit: "... can achieve additional speedups by utilizing Matrix Cores", "using pinned
  memory instead of pageable memory ... can lead to a ~3x improvement", "benefit from disabling NUMA balancing",
  "With multicast, ... saving repeated DRAM traffic";
- named as the subject of a claimed result: "SageAttention reaches 560T, 2.7x faster than FlashAttention2", "QServe
  achieves 1.2x-1.4x higher throughput", "Preallocating minimizes allocation overhead";
- defined as a kind of method: "The Ellpack format is an effective data structure for SpMV", "X is a technique that
  ..." (not "ABfmt is the data format of the A & B matrices": a definite article defines a parameter);
- recommended for a purpose (learned-21, eval/ingest/runs/proposals-session47.md): "To mitigate the cost you can use
  `FastDivmod` to pre-calculate the factors", "we introduce FP16 accumulation when applicable for higher throughputs";
- said to be slow or expensive, a cost (learned-21): "However, integer division is quite slow", "Instantiating a graph
  is relatively expensive".

Each function returns candidate names, leaving their kind, whether the graph has them, and their support to the
proposal finder. The patterns read sentence form only; none knows a document, a product or a label.
"""

from __future__ import annotations

import re

from .relations import gains_of

# A noun phrase as a name: one to four words, none a function word; it ends at punctuation or a function word.
_STOP = (r"(?:the|a|an|and|or|of|to|in|on|for|with|by|from|at|as|is|are|was|were|be|can|could|may|might|will|would|"
         r"should|must|that|which|who|where|when|while|than|instead|into|through|via|such|like|including|this|these|"
         r"those|it|its|their|our|we|you|not|also|only|both|each|all|more|most|further|now|already|directly|"
         r"significantly|dramatically|substantially|up|"
         r"reduces?|improves?|increases?|achieves?|provides?|allows?|lets|enables?|makes?|helps?|gives?|delivers?|"
         r"runs?|reaches|results?|leads?|minimi[sz]es|eliminates|avoids|saves|speeds|accelerates|outperforms|"
         r"demonstrates|yields|brings|shows|offers|intends|replaces|feeds|copies|fuses|compared|versus|vs|over|against|"
         r"rather|combines?|overlaps|manages?|precomputes?|partitions|reuses?|keeps?)")
PHRASE_WORD = rf"(?!{_STOP}\b)[A-Za-z0-9][\w+/.-]*(?<![.])"
# learned-17: a lower-case adverb in -ly past a name's first word ends it ("Using gf4 currently carries ..." names gf4);
# the nouns in -ly stay ("inline assembly")
ADVERB = r"(?-i:(?!(?:assembly|family|supply|anomaly|butterfly|monopoly)\b)[a-z]{3,}ly)\b"
PHRASE = rf"{PHRASE_WORD}(?:\s+(?!{ADVERB}){PHRASE_WORD}){{0,3}}"

# Introduced by name in lower case, or quoted after an article: "known as loop tiling", "called a "blit" kernel".
CALLED = re.compile(rf"\b(?:known as|(?<!is )called|referred to as|termed|we call (?:this|it|these|them))\s+"
                    rf"(?:an?\s+|the\s+)?(?:[\"“']([^\"”']{{2,40}})[\"”'](?:\s+(\w+))?|({PHRASE}))", re.I)
# Words before an acronym in brackets: "cluster launch control (CLC)" (spelled_acronyms checks the initials).
ACRONYM_ANY = re.compile(r"((?:[A-Za-z][\w-]*\s+){1,6})\(([A-Za-z]{2,6})\)")
# The means of a benefit: "by utilizing Matrix Cores", "Using pinned memory ...", "by enabling page migration". After a
# comma only a use is a means ("..., using pinned memory ... can lead to"); "..., enabling savings" states a result.
MEANS = re.compile(rf"(?:\b(by|benefit(?:s|ed|ing)? from)\s+|^\W*|[,;]\s+(?=us|util|lev|appl|empl|adopt))"
                   rf"(using|utili[sz]ing|leveraging|applying|employing|adopting|enabling|disabling)\s+"
                   rf"(?:an?\s+|the\s+)?({PHRASE})", re.I)
# "With multicast, a single transaction ... saving repeated traffic": what a sentence's result comes with.
WITH = re.compile(rf"^\W*with\s+({PHRASE}),", re.I)
# A benefit: a cost lowered or a good raised, close after the verb ("reduces allocation overhead", "improve the
# utilization"; not "reduce instruction throughput", a harm), or a speedup in words.
BENEFIT = re.compile(r"\b(?:reduc\w+|minimi[sz]\w+|eliminat\w+|avoid\w*|sav\w+|lower\w*|hid(?:e|es|ing)|cut\w*)\b"
                     r"(?:\s+[\w-]+){0,4}?\s+(?:memory|latency|time|overhead|traffic|footprint|pressure|consumption|"
                     r"fragmentation|usage|cost|stalls?|conflicts?)\b"
                     r"|\b(?:improv\w+|accelerat\w+|speeds? up|boost\w*|increas\w+|rais\w+)\b(?:\s+[\w-]+){0,4}?\s+"
                     r"(?:speed|throughput|performance|utili[sz]ation|bandwidth|efficien\w+|occupancy)\b"
                     r"|\bspeed-?ups?\b|\bfaster\b|\bperformance (?:gain|improvement|boost)s?\b", re.I)
# Where or against what a result was measured, before its subject: "On RTX5090, SageAttention reaches ...".
SETTING = r"(?:(?:on|in|with|for|at|across|compared (?:to|with)|relative to)\s+[^,]{1,40},\s*)?"
# The subject of a claimed result: a name opening the sentence, then (an auxiliary and an adverb) a verb of result;
# not a report ("The plot shows that ..."). learned-21: a result in the plural ("MegaBlocks dMoEs outperform MoEs ... by
# up to 40%"), a computation's ("FlashFFTConv computes convolutions up to 7.93 times faster") and a factor in words
# ("is five times faster"); not a past "improved": under a heading naming the technique ("Drain the epilogue with wider
# stores"), "Aligned 64-bit stores improved ... by 4.90%" would propose the stores and take the known technique's gain.
CLAIM_VERB = (r"(?:achieves?|delivers?|reaches|runs|provides?|offers?|gives?|demonstrates?(?! that)|yields?|brings?|"
              r"reduces?|improves?|increases?|minimi[sz]es|eliminates|avoids|saves|speeds up|accelerates|"
              r"outperforms?|computes|is (?:two|three|four|five|six|seven|eight|nine|ten|twice)\b|"
              r"lets|allows|enables|is up to|is \d|are up to|combines?|fuses?|overlaps?|replaces?|"
              r"manages?|precomputes?|partitions?|reuses?|keeps?)")
SUBJECT = re.compile(rf"^\W*{SETTING}(?:the\s+)?({PHRASE})\s+(?:(?:can|could|may|will|would|also|further|often|"
                     rf"then|{ADVERB})\s+){{0,2}}{CLAIM_VERB}\b", re.I)
# learned-22: a switch to a thing opening a claimed result credits that thing: "Switching to CUDA graphs gives ...",
# "As you can see from the graphs, changing to use specialization constants provides a 4.4% performance increase".
SWITCHED = re.compile(rf"^\W*(?:as (?:you can |we can )?see[^,]{{0,40}},\s*)?(?:chang|switch|mov|migrat)ing to "
                      rf"(?:us(?:e|ing)\s+)?(?:the\s+)?({PHRASE})\s+{CLAIM_VERB}\b", re.I)
# Defined as a kind of method: "The Ellpack format is an effective data structure", "X is a technique that ...", with
# its acronym between them ("SmoothQuant (SQ) is a quantization algorithm", learned-21); not
# "X are the mechanism by which ..." nor "Dialects are mechanism to ..." (parts of one library, in the plural).
DEFINED = re.compile(rf"^\W*(?:the\s+)?({PHRASE})(?:\s+\([A-Za-z0-9-]{{2,10}}\))?\s+is an?\s+(?:[\w-]+\s+){{0,2}}?"
                     rf"(?:technique|optimi[sz]ation|method|approach|strategy|mechanism|algorithm|scheme|trick|"
                     rf"format|data structure|data layout)s?\b", re.I)
# learned-21: the means a sentence recommends for a purpose: "you can use `FastDivmod` to pre-calculate the factors"
# (after "To mitigate the cost"), "we introduce FP16 accumulation when applicable for higher throughputs", "To reduce
# the size of the cache, we use a fine-grained quantization method". The purpose after it must state a benefit, or the
# sentence open with the cost it lowers.
USED_FOR = re.compile(rf"\b(?:use|introduce|apply|employ|adopt|leverage)\s+(?:an?\s+|the\s+)?`?({PHRASE})`?"
                      rf"(?:\s+(?:when|where|if)\s+(?:applicable|possible|available|supported))?"
                      rf"(,?\s+(?:to|for|in order to)\s+|\W*$)", re.I)
# A purpose opening the sentence that lowers a cost: "To mitigate the cost, ...", "To avoid this, ...", "To reduce the
# size of the cache, ..." (not "To mitigate this risk", "To avoid use-before-alloc errors": no cost).
COST_WORD = (r"(?:cost|overhead|latency|time|traffic|footprint|pressure|consumption|size|transfers?|cop(?:y|ies)|"
             r"sync\w*|allocations?|stalls?|conflicts?|contention|bottleneck)s?")
REMEDY_PURPOSE = re.compile(rf"^\W*(?:to|in order to)\s+(?:mitigate|reduce|avoid|minimi[sz]e|eliminate|hide|overcome|"
                            rf"amorti[sz]e|lower|cut)\s+(?:(?:this|that|it)\s*,|(?:[\w-]+\s+){{0,4}}?{COST_WORD}\b)",
                            re.I)
# What is said not to be used: "does not need to use", "no need to use", "without having to use", "never use".
NOT_USED = re.compile(r"(?:\bnot|n[’']t|\bno need|\bwithout|\bnever|\bavoid)(?:\s+(?:need|needs|have|having|has|want|"
                      r"wants|required)?\s*(?:to)?)?\s*$", re.I)
# A purpose that raises a speed: "for higher throughputs", "to get better performance".
RAISED = re.compile(r"\b(?:higher|better|lower|faster|improved|reduced|increased)\s+(?:throughputs?|performance|"
                    r"latency|speed|bandwidth|utili[sz]ation|efficiency|run-?time)\b", re.I)
# learned-21: a thing a sentence says is slow or expensive is a cost the graph may lack: "However, integer division is
# quite slow", "Instantiating a graph is relatively expensive" (a gerund's object may take an article); not "RSTD is
# expensive to recompute" (what it costs to redo), nor "This stage is slow" (a pronoun).
COSTLY = re.compile(rf"^\W*(?:however|but|unfortunately|note that|in practice)?,?\s*(?:the\s+)?"
                    rf"((?:(?-i:[A-Za-z][a-z]+ing)\s+(?:an?\s+|the\s+)?)?{PHRASE})\s+(?:is|are)\s+"
                    rf"(?:(?:quite|relatively|very|rather|extremely|prohibitively|fairly|notoriously|still|often|"
                    rf"usually|generally|typically)\s+)?(?:slow|expensive|costly)\b(?!\s+to\b)",
                    re.I)
# Words that open a sentence without naming anything: pronouns, determiners, the document's own work.
OPENERS = re.compile(r"^(?:this|that|these|those|it|they|them|themselves|itself|we|us|our|you|your|he|she|him|there|"
                     r"here|which|each|every|all|"
                     r"both|such|some|many|most|one|any|other|another|no|its|their|his|her|my|in|on|for|with|by|"
                     r"at|from|if|when|while|as|so|but|then|also|however|thus|overall|finally|first|second|next)$",
                     re.I)
# A head word that names the document's own artefact or its results, not a method: "The kernel achieves ...", "The
# plot ...", "Memory savings also reduce ...".
ARTEFACT = re.compile(r"^(?:kernels?|implementations?|versions?|models?|code|programs?|functions?|users?|approach|"
                      r"method|technique|system|library|framework|gpus?|cpus?|hardware|compiler|step|change|option|"
                      r"setting|time|work|design|solution|optimi[sz]ations?|savings|gains|improvements|speedups)$",
                      re.I)
# A head word that names a part of the document, never a method, whatever names it: "CUDA sample", "Figure 5".
DOCUMENT_PART = re.compile(r"^(?:results?|benchmarks?|tests?|figures?|tables?|plots?|charts?|graphs?|examples?|"
                           r"samples?|demos?|tutorials?|sections?|posts?|blogs?|readmes?)$", re.I)
# A measure names no method: "Performance improves ...", "The kernel latency now reduces ...", "The memory efficiency
# can increase ...".
MEASURE_WORD = re.compile(r"^(?:performance|speed|throughput|latency|memory|bandwidth|time|efficiency|utili[sz]ation)$",
                          re.I)


def spelled_acronyms(text: str) -> list[str]:
    """Words a sentence spells out before their acronym, in any case: "cluster launch control (CLC)", "block local
    storage (BLS)". The initials must give the acronym: that is what makes the words a name and not a phrase."""
    out = []
    for m in ACRONYM_ANY.finditer(text):
        words, acronym = m.group(1).split(), m.group(2)
        for n in range(min(len(words), len(acronym) + 1), 0, -1):
            initials = "".join(p[0] for w in words[-n:] for p in w.split("-") if p).upper()
            if initials == acronym.upper():
                out.append(" ".join(words[-n:]))
                break
    return out


def called_names(text: str) -> list[tuple[str, bool]]:
    """Names the sentence introduces in lower case or quoted after an article, each with whether it is quoted
    (a quoted name may take its kind from the text around it)."""
    out = []
    for m in CALLED.finditer(text):
        if m.group(1):
            out.append((" ".join(filter(None, (m.group(1), _head(m.group(2))))), True))
        elif m.group(3):
            out.append((m.group(3), False))
    return out


def means_names(text: str) -> list[str]:
    """What the sentence says a benefit comes from using, enabling or disabling: "by utilizing Matrix Cores" gives
    "Matrix Cores", "Disabling NUMA balancing improves ..." keeps "disabling NUMA balancing" (turning a feature off
    is the method, not the feature). After "by" the benefit may come first ("achieve speedups by utilizing X");
    otherwise it must follow the means."""
    out = []
    for m in MEANS.finditer(text):
        said = m.group(1) or ""
        if not (said.lower().startswith("benefit") or _states_result(text if said else text[m.end():])):
            continue
        verb, phrase = m.group(2).lower(), m.group(3)
        out.append(f"{verb} {phrase}" if verb in ("enabling", "disabling") else phrase)
    opening = WITH.match(text)
    if opening and _states_result(text[opening.end():]) and not re.search(r"\d\.\d", opening.group(1)):
        out.append(opening.group(1))  # not a release ("With ROCm 6.2, ...")
    return [n for n in out if _names_something(n)]


def used_names(text: str) -> list[str]:
    """What the sentence recommends using for a purpose that lowers a cost or raises speed (learned-21): "To mitigate
    the cost you can use `FastDivmod` to pre-calculate the factors" gives "FastDivmod"; "use the profiler to save
    the report" states no benefit and gives nothing."""
    opening = bool(REMEDY_PURPOSE.match(text))
    out = []
    for m in USED_FOR.finditer(text):
        if NOT_USED.search(text[:m.start()]):  # "the adapter does not need to use DMA translation": what is not used
            continue
        purpose = text[m.end():] if m.group(2).strip(" ,") else ""  # the name may end the sentence
        if (opening or _states_result(purpose) or RAISED.search(purpose)) and _names_something(m.group(1)):
            out.append(m.group(1))
    return out


def costly_name(text: str) -> str:
    """The thing a sentence opens by saying is slow or expensive ("integer division is quite slow"), or "" (learned-21):
    a cost, named as the sentence names it."""
    m = COSTLY.match(text)
    if not m:
        return ""
    name = m.group(1)
    # a gerund's object is no part of the document ("Instantiating a graph"): only its first word is checked
    gerund = re.match(r"[A-Za-z][a-z]+ing\s", name)
    return name if (not OPENERS.match(name.split()[0]) if gerund else _names_something(name)) else ""


def subject_name(text: str) -> str:
    """The name that opens a sentence claiming a result for it ("QServe achieves 1.2x-1.4x higher throughput",
    "Preallocating minimizes allocation overhead"), or what a switch opening it goes to ("changing to use
    specialization constants provides a 4.4% performance increase", learned-22), or "": the claim must state a factor
    or a benefit."""
    m = SUBJECT.match(text) or SWITCHED.match(text)
    if not m or not _states_result(text[m.end(1):]) or MEASURE_WORD.match(m.group(1).split()[-1]):
        return ""
    return m.group(1) if _names_something(m.group(1)) else ""


def claims_for(text: str, name: str) -> bool:
    """Whether the sentence claims its result for `name`: as its subject or as its means. A sentence that only
    mentions the name ("... outperforms both FP8 CurrentScaling and FP8 Block Scaling") states another's result."""
    return name.lower() in {n.lower() for n in (subject_name(text), *means_names(text), *used_names(text)) if n}


def defined_name(text: str) -> str:
    """The name a sentence defines as a method or a format ("The Ellpack format is an effective data structure"),
    or ""."""
    m = DEFINED.match(text)
    return m.group(1) if m and _names_something(m.group(1)) else ""


def _states_result(text: str) -> bool:
    """Whether the text states a benefit or a speedup: what makes a means or a subject a technique."""
    return bool(BENEFIT.search(text) or gains_of(text))


def _names_something(phrase: str) -> bool:
    """Not a pronoun or a determiner, nor a part of the document ("CUDA sample"), nor only the document's own
    artefact ("The kernel", "Our implementation") unless a word of the phrase is itself a name ("TC-FPx kernel",
    "Fused Linear kernels")."""
    words = phrase.split()
    if OPENERS.match(words[0]) or DOCUMENT_PART.match(words[-1]):
        return False
    if ARTEFACT.match(words[-1]) and not any(_name_like(w, i) for i, w in enumerate(words[:-1])):
        return False
    return not (len(words) == 1 and MEASURE_WORD.match(words[0]))


def _name_like(word: str, index: int) -> bool:
    """A word written as a name: capitals or digits past its first letter ("MXFP8", "TC-FPx", "INT4"), or a capital
    past the sentence's first word."""
    return bool(re.search(r"[A-Z0-9]", word[1:])) or (index > 0 and word[:1].isupper())


def _head(word: str | None) -> str:
    """The noun after a quoted name, when it says what the name is ("blit" kernel); not a verb."""
    return word if word and re.fullmatch(r"[a-z]+", word) and not re.fullmatch(_STOP, word, re.I) else ""
