"""Scoring what ingest read, through the real pipeline (embedded store, embedding model, index) as ingest_eval runs it.

Two documents written for the test name the same new technique, each with its own factor. Whichever is ingested
first proposes the node and the other gives it evidence; either way each document's expected proposal and gain
must be found, so recall must not depend on the order of the documents.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kskill.eval.ingest_eval import ingest_paths
from kskill.eval.ingest_scoring import DocumentLabel, recall

pytestmark = pytest.mark.slow

DOCUMENTS = {
    "serving.md": "# Serving results\n\nCompared with the leading serving stack, LoomKV achieves 1.2x-1.4x higher "
                  "throughput when serving small models.\n",
    "long-prompts.md": "# Long prompts\n\nOn long prompts, LoomKV achieves 2.5x higher throughput than paged "
                       "attention.\n",
}
PROPOSAL = {"proposal": {"kind": "Technique", "match": "loom ?kv"}}
LABELS = [DocumentLabel("serving.md", "tune", [PROPOSAL, {"gain": [{"match": "loom ?kv"}, 1.4]}]),
          DocumentLabel("long-prompts.md", "tune", [PROPOSAL, {"gain": [{"match": "loom ?kv"}, 2.5]}])]


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("order")
    for name, text in DOCUMENTS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return [folder / name for name in DOCUMENTS]


def scored(paths: list[Path]) -> dict:
    run = ingest_paths(paths)
    return recall(LABELS, {name: f.triples for name, f in run["files"].items()})


def test_recall_does_not_depend_on_the_order_documents_are_ingested(documents):
    forward, backward = scored(documents), scored(documents[::-1])
    assert forward == backward
    assert (forward["found"], forward["expected"]) == (4, 4)


def test_a_later_documents_evidence_for_an_earlier_proposal_is_reported_as_a_proposal(documents):
    run = ingest_paths(documents)
    later = run["files"]["long-prompts.md"]
    assert later.counts["nodes_created"] == 0  # the first document proposed the node
    gain = next(r for r in later.triples if r["relation"] == "GAIN")
    assert (gain["subject"], gain["gain"], gain["subject_proposed"]["name"]) == ("loomkv", 2.5, "LoomKV")
