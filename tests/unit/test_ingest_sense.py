"""The sense-check experiment's examples (eval/ingest_sense.py): judged items with their node and sentence."""

from __future__ import annotations

from kskill.eval.ingest_sense import judged_items
from kskill.ingest.sense import window


def test_the_words_around_a_name_are_its_sense():
    text = "The graphics pipeline has vertex, geometry and pixel shader stages in every frame."
    start = text.index("pipeline")
    assert window(text, (start, start + 8), words=2) == "The graphics pipeline has vertex,"
    assert window(text, None) == text


def test_judged_items_carry_their_node_verdict_and_sentence():
    items = judged_items()
    assert len(items) > 250 and len({it["document"] for it in items}) > 50
    pipeline = [it for it in items if it["document"] == "amd-lab-notes-profilers.md" and it["node"] == "software_pipelining"]
    assert pipeline and not pipeline[0]["right"]
    remedy = next(it for it in items if " ADDRESSED_BY " in it["item"])
    assert remedy["node"] == remedy["item"].split()[-1] and remedy["edge"] == 1.0


def test_the_sense_check_drops_a_name_used_in_another_sense():
    import numpy as np

    from kskill.ingest.claims import Claim, EntityRef, Span
    from kskill.ingest.lexicon import Mention
    from kskill.ingest.scorer import ClaimScorer
    from kskill.ingest.sense import SENSE_FEATURES, SenseCheck, section_of

    pipelining, autotune = np.array([1.0, 0.0]), np.array([0.0, 1.0])

    class Linker:  # the sentence's words near "pipeline" point at the node's text, or away from it
        kind_of = {"software_pipelining": "Technique", "autotune_launch": "Technique"}

        def mentions(self, text):
            at = text.find("pipeline")
            return [Mention("software_pipelining", "Technique", at, at + 8, True)] if at >= 0 else []

        def embed(self, texts):
            return np.array([pipelining if "stages" in t else autotune for t in texts])

        def node_vectors(self):
            return {"software_pipelining": pipelining, "autotune_launch": autotune}

    weights = tuple(1.0 if f == "window_margin" else 0.0 for f in SENSE_FEATURES)
    check = SenseCheck(ClaimScorer(weights, 0.0, (0.0,) * len(SENSE_FEATURES), (1.0,) * len(SENSE_FEATURES), 0.5,
                                   SENSE_FEATURES))

    def evidence(quote: str, node: str = "software_pipelining", relation: str = "SUPPORTS") -> Claim:
        return Claim(EntityRef("Technique", node, "" if node else "Ping-pong"), relation, None, 0.7,
                     Span(quote, "section Intro, offset 3"), "rules")

    meant = evidence("The pipeline has two stages that overlap copies with math.")
    other = evidence("This is the last step of the agent's pipeline.")
    proposal = evidence("This is the last step of the agent's pipeline.", node="")
    assert check.filter([meant, other, proposal], Linker()) == [meant, proposal]
    assert section_of("section Intro, offset 3") == "Intro" and section_of("p. 4") == ""
