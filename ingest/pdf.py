"""PDF text, page by page, through pypdf; slide decks' bullets and ragged lines made readable.

Encrypted files are opened with the empty password (many "protected" PDFs use one); a real
password, a corrupt file or a scan without a text layer is a `FileRejected` naming the fix.
"""

from __future__ import annotations

import io
import logging
import re
import statistics
from dataclasses import dataclass

from .errors import FileRejected

BULLETS = re.compile(r"^[ \t]*[●•▪◦‣∙○■□–\-\u2013\u2014>]+[ \t]+", re.M)
HYPHEN_BREAK = re.compile(r"(\w)-\n(\w)")


SLIDE_TOOLS = re.compile(r"powerpoint|keynote|google|impress|beamer|slides", re.I)
PLACEHOLDER_TITLES = re.compile(r"^(?:untitled|presentation\d*|powerpoint presentation|slide \d+|microsoft word.*|.*\.(?:pdf|pptx?|docx?|tex))$",
                                re.I)


@dataclass(frozen=True)
class PdfText:
    pages: list[str]
    title: str = ""  # from the document information, when it is a real title
    author: str = ""
    slides: bool = False  # a slide deck: landscape pages with little text each, or made by a slide tool


def read_pdf(data: bytes) -> list[str]:
    """The text of each page; bullets become line starts the sentence splitter can see."""
    return read_pdf_text(data).pages


def read_pdf_text(data: bytes) -> PdfText:
    """The text of each page and what the file says about itself (title, author, slides or not)."""
    import pypdf
    from pypdf.errors import FileNotDecryptedError, PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # malformed-but-readable files warn per object
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise FileRejected("the PDF is encrypted with a password: decrypt it first "
                               "(e.g. `qpdf --decrypt --password=... in.pdf out.pdf`)")
        pages = [_page_text(page) for page in reader.pages]
        info = _info(reader)
        shape = _landscape(reader)
    except FileRejected:
        raise
    except FileNotDecryptedError as exc:
        raise FileRejected("the PDF is encrypted with a password: decrypt it first "
                           "(e.g. `qpdf --decrypt --password=... in.pdf out.pdf`)") from exc
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError,
            RecursionError, OSError, NotImplementedError) as exc:
        # pypdf reports damage through many exception types; all mean "this file is broken".
        raise FileRejected(f"the PDF is damaged and cannot be read ({type(exc).__name__}: {exc}); "
                           "re-export or repair it (e.g. `qpdf in.pdf out.pdf`)") from exc
    if not pages:
        raise FileRejected("the PDF has no pages")
    if not any(p.strip() for p in pages):
        raise FileRejected("the PDF has no text layer (a scan or images only): run OCR on it first "
                           "(e.g. `ocrmypdf in.pdf out.pdf`)")
    tool = f"{info.get('/Creator', '')} {info.get('/Producer', '')}"
    sparse = statistics.median(len(p) for p in pages) < 1200
    title = " ".join(info.get("/Title", "").split())
    return PdfText(pages, title=title if title and not PLACEHOLDER_TITLES.match(title) else "",
                   author=" ".join(info.get("/Author", "").split()),
                   slides=sparse and (shape or bool(SLIDE_TOOLS.search(tool))))


def _info(reader) -> dict[str, str]:
    try:
        meta = reader.metadata or {}
        return {str(k): str(v) for k, v in meta.items() if isinstance(v, str)}
    except Exception:  # a damaged information dictionary: the text is still usable
        return {}


def _landscape(reader) -> bool:
    try:
        box = reader.pages[0].mediabox
        return float(box.width) > 1.2 * float(box.height)
    except Exception:  # no usable page box: say nothing about the shape
        return False


def _page_text(page) -> str:
    try:
        text = page.extract_text() or ""
    except Exception as exc:  # a page whose content stream pypdf cannot parse: report, do not guess
        raise FileRejected(f"a page of the PDF cannot be read ({type(exc).__name__}: {exc}); "
                           "re-export or repair it (e.g. `qpdf in.pdf out.pdf`)") from exc
    text = text.replace("\x00", "")
    text = HYPHEN_BREAK.sub(r"\1\2", text)
    # A bullet starts a new statement on slides: mark it as a paragraph break.
    return BULLETS.sub("\n", text)
