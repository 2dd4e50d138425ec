"""The sense-check experiment's examples (eval/ingest_sense.py): judged items with their node and sentence."""

from __future__ import annotations

from kskill.eval.ingest_sense import _window, judged_items


def test_the_words_around_a_name_are_its_sense():
    text = "The graphics pipeline has vertex, geometry and pixel shader stages in every frame."
    start = text.index("pipeline")
    assert _window(text, (start, start + 8), words=2) == "The graphics pipeline has vertex,"
    assert _window(text, None) == text


def test_judged_items_carry_their_node_verdict_and_sentence():
    items = judged_items()
    assert len(items) > 250 and len({it["document"] for it in items}) > 50
    pipeline = [it for it in items if it["document"] == "amd-lab-notes-profilers.md" and it["node"] == "software_pipelining"]
    assert pipeline and not pipeline[0]["right"]
    remedy = next(it for it in items if " ADDRESSED_BY " in it["item"])
    assert remedy["node"] == remedy["item"].split()[-1] and remedy["edge"] == 1.0
