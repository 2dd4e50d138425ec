"""Engineering notes: both spellings parse exactly; a precondition outside the vocabulary is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from kskill.ingest.errors import NoteError
from kskill.ingest.loaders import load_document
from kskill.ingest.notes import is_note, note_citation, parse_note

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"
METRICS = {"has_gemm": "bool", "gemm_k": "number", "dtype": "string", "code_custom_kernels": "number",
           "dram_throughput_pct": "number"}


def test_front_matter_note_is_ingested_exactly():
    doc = load_document(FIXTURES / "stream_k_note.md")
    assert is_note(doc)
    claims = {c.triple: c for c in parse_note(doc, METRICS)}
    assert set(claims) == {
        ("tail_effect", "ADDRESSED_BY", "new:stream-k decomposition"),
        ("new:stream-k decomposition", "REQUIRES", "has_gemm is_true"),
        ("new:stream-k decomposition", "REQUIRES", "gemm_k >= 4096"),
        ("new:stream-k decomposition", "FORBIDDEN_WHEN", "dtype == float64"),
    }
    link = claims[("tail_effect", "ADDRESSED_BY", "new:stream-k decomposition")]
    assert (link.gain, link.priority, link.confidence) == (1.2, 40, 1.0)
    assert link.evidence.location == "section 5" and link.evidence.quote.startswith("Stream-K achieves")
    assert "Osama et al." in note_citation(doc)


def test_heading_note_with_ids_and_a_percentage_gain():
    doc = load_document(FIXTURES / "coalescing_note.md")
    assert is_note(doc)
    claims = {c.triple: c for c in parse_note(doc, METRICS)}
    assert set(claims) == {("uncoalesced_access", "ADDRESSED_BY", "memory_coalescing"),
                           ("memory_coalescing", "REQUIRES", "code_custom_kernels >= 1")}
    link = claims[("uncoalesced_access", "ADDRESSED_BY", "memory_coalescing")]
    assert link.gain == 1.3
    assert link.evidence.location == "profiling notes, kernel transpose_v2"


def note(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "n.md"
    path.write_text(f"---\nkskill: note\n{body}---\n")
    return path


@pytest.mark.parametrize("body, problem", [
    ("technique: kernel_fusion\npreconditions: [dram_throughput >= 60]\n", "not in the metric vocabulary.*dram_throughput_pct"),
    ("technique: kernel_fusion\npreconditions: ['gemm_k ~ 3']\n", "not `metric op value`"),
    ("technique: kernel_fusion\npreconditions: ['gemm_k >= many']\n", "is a number"),
    ("technique: kernel_fusion\nexpected_gain: 0.5\n", "below 1"),
    ("bottleneck: memory_bandwidth\n", "names no technique"),
    ("technique: kernel_fusion\ncolour: blue\n", "unknown key 'colour'"),
    ("technique: [unclosed\n", "not valid YAML"),
])
def test_bad_notes_are_rejected_with_the_problem_named(tmp_path, body, problem):
    doc = load_document(note(tmp_path, body))
    with pytest.raises(NoteError, match=problem):
        parse_note(doc, METRICS)


def test_markdown_without_the_format_is_not_a_note(tmp_path):
    path = tmp_path / "plain.md"
    path.write_text("# Bottleneck analysis\n\nSome prose.\n")
    assert not is_note(load_document(path))
