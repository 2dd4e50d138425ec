"""Rules of learned-7 that read more from a document without reading names in another sense: the word "pipeline" in
its everyday sense, ... (eval/ingest/runs/recall-rules-session35.md)."""

from __future__ import annotations

import pytest

from kskill.graph_schema.skillbase import read_builtin
from kskill.ingest.lexicon import Lexicon


@pytest.fixture(scope="module")
def lexicon() -> Lexicon:
    payload = read_builtin().payload
    return Lexicon([{"id": n.id, "kind": n.label, "name": n.name}
                    for (label, _), n in payload.nodes.items() if label in ("Bottleneck", "Technique", "ProtocolStep")])


def _ids(lexicon: Lexicon, text: str) -> set[str]:
    return {m.id for m in lexicon.mentions(text)}


@pytest.mark.parametrize("text", ["Calling the compiled pipeline on a new image size triggers a recompilation.",
                                  "Each tool sits at a different level of this lowering pipeline."])
def test_a_pipeline_as_a_workflow_is_no_software_pipelining(lexicon, text):
    assert "software_pipelining" not in _ids(lexicon, text)


@pytest.mark.parametrize("text", ["The pipeline releases the buffer as soon as the consumer is done with it.",
                                  "A pipeline with a depth of 3 hides the load latency.",
                                  "Software pipelining hides the memory latency."])
def test_a_pipeline_of_stages_buffers_or_loads_is_software_pipelining(lexicon, text):
    assert "software_pipelining" in _ids(lexicon, text)


def test_overlapping_compute_with_transfers_is_software_pipelining_in_either_order(lexicon):
    assert "software_pipelining" in _ids(lexicon, "By overlapping computation and data transfer, it is faster.")
