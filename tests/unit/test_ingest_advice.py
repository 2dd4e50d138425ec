"""learned-24: names a practitioner's advice gives (ingest/advice.py; eval/ingest/runs/advice-session48.md). What a
title or a sentence advises using, with a reason of speed or cost, is a Technique; what it advises against, or says can
be slow, a Bottleneck; the name is the noun phrase advised, not the clause."""

from __future__ import annotations

import pytest

from kskill.ingest.advice import advised_names, advised_title


@pytest.mark.parametrize("text, name", [
    ("Try to use single precision training ( gpu_use_dp=false ) when possible, because most GPUs have poor "
     "double-precision performance.", "single precision training"),
    ("- Prefer recomputation over saving for backward when computation is cheap", "recomputation"),
    ("* Consider using FP16 if you're struggling with arithmetic throughput or register pressure.", "FP16"),
    ("To get good speedup with GPU, it is suggested to use a smaller number of bins.", "smaller number of bins"),
    ("We suggest prioritizing using FP8 first, as FP8 causes very little accuracy degradation and gives strong "
     "performance.", "FP8"),
])
def test_what_advice_says_to_use_for_speed_is_a_technique(text, name):
    assert (name, "Technique") in advised_names(text)


@pytest.mark.parametrize("text", [
    "Use the following commands to build UCX (version 1.14):",  # a plain "Use": a step's tool
    "We recommend using pip to install NCCL so that DeepEP can locate it.",  # a setup step
    "For best performance, you should use CUDA >= 11.8.",  # a version
    "For best performance, we recommend using a Pascal or Maxwell generation GPU.",  # an alternative in a list
    "Prefer return values to output parameters.",  # no reason of speed or cost
    "Prefer a unified async-dependency verifier over isolated instruction-specific checks.",  # correctness, not speed
    "You should use the CDNA3 branch of HK to run on the MI300X.",  # where to run it
])
def test_advice_for_a_tool_a_version_or_style_names_nothing(text):
    assert advised_names(text) == []


@pytest.mark.parametrize("text, name", [
    ("Having a hostcall unnecessarily slows execution down and you can avoid that by using the GPU-friendly "
     "version of the function.", "hostcall"),
    ("If you have multiple threads writing to the same location, the code generator will emit atomic operations, "
     "which can be very slow.", "atomic operations"),
])
def test_what_can_be_slow_or_slows_things_down_is_a_bottleneck(text, name):
    assert (name, "Bottleneck") in advised_names(text)


@pytest.mark.parametrize("text", [
    "Gradient checkpointing slows things down for the given batch size, but since it frees up a lot of memory, "
    "enabling a much larger batch, it actually improves the overall speed.",  # a trade-off of a method
    "Grid group synchronization can be used to implement a global barrier.",  # "can be", no cost
    "Before Hopper, data went through global memory or the L2 cache, which are slow.",  # no verb of doing: a comparison
])
def test_a_cost_a_benefit_outweighs_or_no_cost_is_no_bottleneck(text):
    assert [kind for _, kind in advised_names(text)] == []


def test_a_title_advising_for_or_against_names_the_thing_when_a_sentence_under_it_gives_a_reason():
    reason = ["In tight loops with lots of GPU allocations this will put a lot of pressure on the allocator."]
    assert advised_title("Use Caching Memory Allocator", reason) == ("Caching Memory Allocator", "Technique")
    assert advised_title("Avoid triggering Hostcalls", ["A hostcall slows execution down."]) == ("Hostcalls",
                                                                                                "Bottleneck")
    assert advised_title("Use scoped enums", ["Scoped enums make the code easier to read."]) is None


def _proposed(proposals, tmp_path, text: str) -> dict[str, str]:
    from kskill.ingest.loaders import load_document
    from kskill.ingest.passages import passages

    path = tmp_path / "doc.md"
    path.write_text(text)
    doc = load_document(path)
    return {c.subject.name: c.subject.kind for c in proposals.claims(doc, passages(doc)) if c.relation == "SUPPORTS"}


TIPS = """# Performance Tips

## Use Caching Memory Allocator

Julia frees arrays only when its garbage collector runs. In tight loops with lots of GPU allocations this will put a
lot of pressure on the allocator and may interfere with other programs. Using caching allocator gives users a precise
control of GPU memory.

## Avoid triggering Hostcalls

Some functions in a kernel may raise an exception. Having a hostcall unnecessarily slows execution down.
"""


def test_advice_titles_are_proposed_named_as_the_sentences_under_them_write_them(proposals, tmp_path):
    found = _proposed(proposals, tmp_path, TIPS)
    assert found.get("caching allocator") == "Technique"
    assert "hostcall" in {n.lower() for n, kind in found.items() if kind == "Bottleneck"}
    assert len([n for n in found if n.lower().startswith("hostcall")]) == 1  # "Hostcalls" and "hostcall" are one


def test_training_is_where_an_advised_format_is_used_not_its_name(proposals, tmp_path):
    text = ("# GPU tuning\n\nTry to use single precision training when possible, because most GPUs have poor "
            "double-precision performance.\n")
    assert _proposed(proposals, tmp_path, text).get("single precision") == "Technique"
