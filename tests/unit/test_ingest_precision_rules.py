"""The precision rules of learned-9 (ingest/unstated.py, lexicon.OTHER_SENSES, relations._gains): each error class
judged on heldout11 (eval/ingest/runs/precision-rules-session35c.md), on small documents written for the test."""

from __future__ import annotations

import pytest

from kskill.graph_schema.skillbase import read_builtin
from kskill.ingest.claims import Claim, EntityRef, Span
from kskill.ingest.lexicon import Lexicon
from kskill.ingest.unstated import why_unstated


def _nodes() -> list[dict]:
    payload = read_builtin().payload
    return [{"id": n.id, "kind": n.label, "name": n.name, "description": n.description}
            for (label, _), n in payload.nodes.items() if label in ("Bottleneck", "Technique", "ProtocolStep")]


@pytest.fixture(scope="module")
def lexicon() -> Lexicon:
    return Lexicon(_nodes())


@pytest.fixture(scope="module")
def rules():
    from kskill.ingest.extract_rules import RuleExtractor, RuleSettings
    from kskill.ingest.linking import EntityLinker

    return RuleExtractor(EntityLinker(_nodes(), [], None), RuleSettings(learned=False))


def _gains(rules, tmp_path, text: str) -> list[tuple[str, float]]:
    from kskill.ingest.loaders import load_document

    path = tmp_path / "doc.md"
    path.write_text(text)
    return [(c.subject.id, c.gain) for c in rules.extract(load_document(path)) if c.relation == "GAIN"]


def evidence(node: str, kind: str) -> Claim:
    return Claim(EntityRef(kind, node), "SUPPORTS", None, 0.7, Span("", ""), "rules")


def reason(lexicon: Lexicon, claim: Claim, text: str, heading: str = "") -> str:
    return why_unstated(claim, text, lexicon.mentions(text), heading=heading)


@pytest.mark.parametrize("text, why", [
    ("Users can create a table of kernels during warm-up runs.", "what a tool or user can do, not how to measure"),
    ("These options can be used to list the clocks to be tested.", "what a tool or user can do, not how to measure"),
    ("The script builds the benchmarks itself, because it records the build times.", "a build's time, not a measurement"),
    # learned-30
    ("This benchmark does not cover warm-up runs or the caches past L2.", "what a benchmark covers, not how to measure"),
    ("It is suitable to study warm-up effects and clock frequencies.", "what a benchmark covers, not how to measure"),
])
def test_a_protocol_step_needs_a_measuring_rule_not_a_tools_description(lexicon, text, why):
    assert reason(lexicon, evidence("measure_warmup", "ProtocolStep"), text, heading="Benchmarks") == why


@pytest.mark.parametrize("text", [
    "Run a few warm-up iterations before timing, so that caches and clocks settle.",
    "It is often useful to restrict profiling to a few steps after warm-up.",
    "You can time the kernel with CUDA events after a warm-up run.",
    "Reduced clock speeds harm the relative speedups of other kernels.",
])
def test_a_told_or_explained_measuring_rule_is_evidence(lexicon, text):
    assert reason(lexicon, evidence("measure_warmup", "ProtocolStep"), text, heading="Benchmarks") == ""


def test_a_hardware_units_pipeline_is_no_software_pipelining(lexicon):
    stalls = "Compute-intensive kernels need latency hiding for ALU pipeline stalls."
    assert reason(lexicon, evidence("software_pipelining", "Technique"), stalls) == "another sense of the node's name"
    loads = "A multi-stage pipeline of shared memory loads hides the latency of global memory."
    assert reason(lexicon, evidence("software_pipelining", "Technique"), loads) == ""


@pytest.mark.parametrize("lead", ["This is exactly what tiling into shared memory accomplishes:",
                                  "Why Higher Occupancy Doesn't Always Help:"])
def test_a_lead_line_that_points_ahead_or_is_a_heading_is_no_evidence(lexicon, lead):
    assert reason(lexicon, evidence("increase_occupancy", "Technique"), lead) == \
        "a lead line: what follows it states, not the line"


def test_a_lead_line_that_says_something_itself_stays(lexicon):
    text = "On AMD accelerators, set num_stages according to the following rules:"
    assert reason(lexicon, evidence("software_pipelining", "Technique"), text) == ""


@pytest.mark.parametrize("name, kind", [("Optimize the bottleneck", "Bottleneck"),
                                        ("Consider tiling strategies", "Technique")])
def test_advice_in_the_imperative_is_no_proposal(name, kind):
    claim = Claim(EntityRef(kind, "", name), "SUPPORTS", None, 0.6, Span("", ""), "rules")
    assert why_unstated(claim, "", []) == "advice in the imperative, not a named thing"


def test_the_baseline_of_a_comparison_gains_nothing(rules, tmp_path):
    text = "# Results\n\nCompared to the unfused style using cuBLAS GEMMs, we improve performance by 1.5x.\n"
    assert _gains(rules, tmp_path, text) == []


def test_a_technique_named_as_the_baseline_gets_no_evidence(lexicon):
    text = "Compared to the unfused style using cuBLAS GEMMs, we improve performance by 1.5x."
    assert reason(lexicon, evidence("vendor_library", "Technique"), text) == "named as the baseline of a comparison"


def _under_heading(lexicon: Lexicon, heading: str, text: str) -> list[tuple[str, str, str, str]]:
    """What the claim rules (at the scorer's low bars) read from `text` under a section titled `heading`."""
    from kskill.ingest.claims import Span
    from kskill.ingest.linking import EntityLinker, PassageLinks
    from kskill.ingest.relations import ClaimRules, SentenceView

    view = SentenceView(text, Span(text, f"section {heading}, offset 0"), lexicon.mentions(text),
                        [lexicon.mentions(heading)], [], PassageLinks(), heading)
    rules = ClaimRules(EntityLinker(_nodes(), [], None), edge_bar=0.3, evidence_bar=0.3)
    return [(*c.triple, c.kind) for c in rules.claims(view)]


@pytest.mark.parametrize("text", [
    "Increasing register usage means fewer warps stay resident, effectively reducing occupancy.",
    "The compiler keeps register usage low by spilling to scratch memory instead, which is detrimental to performance.",
])
def test_what_a_sections_technique_makes_worse_is_its_cost_not_a_remedy(lexicon, text):
    """learned-30 (seen in heldout33's run): under "Register tiling", a sentence saying what gets worse states a cause,
    evidence for the bottleneck, and no remedy by the section's technique."""
    claims = _under_heading(lexicon, "Register tiling", text)
    assert not [c for c in claims if c[1] == "ADDRESSED_BY"], claims
    assert ("register_pressure", "SUPPORTS", "", "cause") in claims


def test_a_remedy_the_sections_technique_brings_stays(lexicon):
    claims = _under_heading(lexicon, "Register tiling", "Keeping outputs in registers hides memory latency.")
    assert ("memory_latency", "ADDRESSED_BY", "register_blocking", "remedy") in claims


def test_a_chapters_title_that_tells_what_it_holds_is_a_pointer(lexicon):
    """learned-30: "Debugging and Profiling describes Nsight Compute ..." sends the reader to a chapter."""
    text = "Debugging and Profiling describes Nsight Compute and warm-up runs for timing."
    assert reason(lexicon, evidence("measure_warmup", "ProtocolStep"), text, heading="Measuring") == "points elsewhere"
    assert reason(lexicon, evidence("measure_warmup", "ProtocolStep"),
                  "This section describes warm-up runs before timing.", heading="Measuring") != "points elsewhere"


@pytest.mark.parametrize("text", [
    "Switch to a faster data loader, for example one that prefetches the next batches.",
    "Two streams let the copies overlap with the kernels of the previous batch.",
    "Tune the block sizes, and optionally the scalar prefetch of the grid indices.",
])
def test_the_hosts_prefetching_and_streams_are_no_software_pipelining(lexicon, text):
    """learned-30: a data loader's prefetch, streams overlapping copies with kernels and Pallas's scalar prefetch stage
    nothing ahead of a kernel's compute."""
    assert reason(lexicon, evidence("software_pipelining", "Technique"), text) == "another sense of the node's name"
    inside = "Prefetch the next tile into shared memory while the current one is computed, to overlap loads and math."
    assert reason(lexicon, evidence("software_pipelining", "Technique"), inside) == ""


def _named(lexicon: Lexicon, text: str) -> set[str]:
    return {m.id for m in lexicon.mentions(text)}


def test_hiding_latency_names_memory_latency_but_not_an_arithmetic_units(lexicon):
    """learned-31: "hiding even more latency" with words between names memory latency; an ALU's or an instruction's
    latency is not memory's."""
    hiding_more = "Double buffering overlaps the loads with the math, hiding even more latency."
    assert "memory_latency" in _named(lexicon, hiding_more)
    assert "memory_latency" in _named(lexicon, "Warp switching hides the global memory latency.")
    assert "memory_latency" not in _named(lexicon, "Higher occupancy helps hide ALU pipeline latency.")
    assert "memory_latency" not in _named(lexicon, "Fewer resident warps are worse at hiding instruction latency.")
    # learned-32: nor a bank conflict's
    assert "memory_latency" not in _named(lexicon, "The second kernel hides the latency of the write conflict.")
    assert "memory_latency" in _named(lexicon, "Prefetching hides the latency of global loads.")


def test_a_caches_own_eviction_policy_is_no_cache_hint(lexicon):
    """learned-31: the hardware's eviction policy is no cache modifier; a load's is."""
    hardware = "The caches help, but they are at the mercy of the access pattern and eviction policy."
    assert "cache_modifiers" not in _named(lexicon, hardware)
    assert "cache_modifiers" in _named(lexicon, "Set the eviction policy of the weight loads to evict_first.")


@pytest.mark.parametrize("name, kind", [("memory-bound", "Bottleneck"), ("upper-bound with their sum", None)])
def test_a_bound_of_arithmetic_is_no_bottleneck(name, kind):
    """learned-31: "upper-bound" (a bound of arithmetic) heads no bottleneck, "memory-bound" does."""
    from kskill.ingest.proposals import BOTTLENECK_HEADS

    assert bool(BOTTLENECK_HEADS.search(name)) == (kind == "Bottleneck")
