"""Reading documents: PDF, Markdown, reStructuredText, HTML and plain text, into one `Document` shape.

Markup is blanked out character for character (replaced by spaces), never deleted, so an
offset into `Document.text` is an offset into the file's text and an Evidence location
("offset 1234") can be checked against the file. PDFs are read page by page with pypdf and
locate evidence by page. Every way a file can be unusable raises `FileRejected` with the fix.
"""

from __future__ import annotations

import bisect
import fnmatch
import functools
import hashlib
import html
import os
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import FileRejected

KINDS = {
    ".pdf": "pdf", ".md": "markdown", ".markdown": "markdown", ".rst": "rst",
    ".html": "html", ".htm": "html", ".txt": "text", ".text": "text",
}
DEFAULT_EXCLUDE = (".*", "*/.*", "node_modules", "__pycache__")
MAX_TEXT_BYTES = 20 * 1024 * 1024  # a 20 MB note is already a book; larger text is almost surely data
MAX_PDF_BYTES = 200 * 1024 * 1024
PAGE_BREAK = "\n\f\n"


@dataclass(frozen=True)
class Section:
    start: int
    title: str
    level: int = 1  # 1 for a top heading; deeper headings count up


@dataclass
class Document:
    """A loaded file: its text with markup blanked, where pages and sections start, and its hash."""

    path: Path
    kind: str
    title: str
    text: str
    content_hash: str
    raw: str = ""  # the file's text before blanking (notes are parsed from it); "" for PDFs
    page_starts: list[int] = field(default_factory=list)  # offset of each page, PDFs only
    sections: list[Section] = field(default_factory=list)
    authors: str = ""
    source_kind: str = "documentation"  # paper, slides, note (a repository README) or documentation

    @property
    def pages(self) -> int:
        return len(self.page_starts)

    def page_of(self, offset: int) -> int:
        return bisect.bisect_right(self.page_starts, offset)

    @functools.cached_property
    def _section_starts(self) -> list[int]:
        return [s.start for s in self.sections]  # sections are set when the document is loaded

    def section_of(self, offset: int) -> str:
        return (self.section_chain(offset) or [""])[0]

    def section_chain(self, offset: int) -> list[str]:
        """Titles of the section holding `offset` and of its parents, innermost first."""
        i = bisect.bisect_right(self._section_starts, offset) - 1
        chain: list[str] = []
        level = None
        while i >= 0:
            section = self.sections[i]
            if level is None or section.level < level:
                chain.append(section.title)
                level = section.level
            i -= 1
        return chain

    def location(self, offset: int) -> str:
        """Where a passage is, as a reader would look for it: the page, or the section and offset."""
        if self.page_starts:
            return f"p. {self.page_of(offset)}"
        section = self.section_of(offset)
        return f"section {section}, offset {offset}" if section else f"offset {offset}"


# --- finding files ------------------------------------------------------------------------

@dataclass(frozen=True)
class Found:
    """A file the walk met: to read (reason empty) or skipped, with the reason."""

    path: Path
    skipped: str = ""
    missing: bool = False  # a path the user named that does not exist: a failure, not a skip


def discover(paths: Sequence[Path], include: Sequence[str] = (), exclude: Sequence[str] = ()) -> list[Found]:
    """Files under `paths`, walked in sorted order. A file named directly is read whatever `include`
    says; files found in a directory must match an include glob when any is given.
    Exclude globs match a file's or folder's name or its path relative to the walked folder.
    Without include globs, files of unsupported types are reported as skipped."""
    chosen = tuple(include)
    exclude = tuple(exclude) + DEFAULT_EXCLUDE
    found: list[Found] = []
    for root in paths:
        root = Path(root)
        if root.is_file():
            found.append(Found(root, _unsupported(root)))
        elif root.is_dir():
            found.extend(_walk(root, chosen, exclude))
        else:
            found.append(Found(root, "no such file or folder", missing=True))
    return found


def _walk(root: Path, include: tuple[str, ...], exclude: tuple[str, ...]) -> Iterable[Found]:
    for folder, dirs, files in os.walk(root):  # symlinked folders are not followed: no loops
        rel_folder = Path(folder).relative_to(root)
        dirs[:] = sorted(d for d in dirs if not _matches(rel_folder / d, exclude))
        for name in sorted(files):
            rel = rel_folder / name
            if _matches(rel, exclude) or (include and not _matches(rel, include)):
                continue  # what the user left out is not reported; an unsupported type is
            path = Path(folder) / name
            yield Found(path, _unsupported(path))


def _matches(rel: Path, globs: Iterable[str]) -> bool:
    text = rel.as_posix()
    return any(fnmatch.fnmatch(rel.name, g) or fnmatch.fnmatch(text, g) for g in globs)


def _unsupported(path: Path) -> str:
    if path.suffix.lower() in KINDS:
        return ""
    return f"unsupported type {path.suffix or '(no extension)'}: kskill reads {', '.join(sorted(KINDS))}"


# --- reading ------------------------------------------------------------------------------

def load_document(path: Path, max_text_bytes: int = MAX_TEXT_BYTES, max_pdf_bytes: int = MAX_PDF_BYTES) -> Document:
    """Read and clean one file; `FileRejected` says why a file cannot be used."""
    path = Path(path)
    kind = KINDS.get(path.suffix.lower())
    if kind is None:
        raise FileRejected(_unsupported(path))
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise FileRejected(f"cannot read the file: {exc.strerror or exc}") from exc
    limit = max_pdf_bytes if kind == "pdf" else max_text_bytes
    if size > limit:
        raise FileRejected(f"the file is {size / 2**20:.0f} MiB, above the {limit / 2**20:.0f} MiB limit for "
                           f"{kind} files: split it, or raise the limit with --max-mb")
    if size == 0:
        raise FileRejected("the file is empty")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FileRejected(f"cannot read the file: {exc.strerror or exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if kind == "pdf":
        from .pdf import read_pdf_text

        return _from_pages(path, read_pdf_text(data), digest)
    raw = decode_text(data)
    text, sections = CLEANERS[kind](raw)
    if not text.strip() and not (kind == "markdown" and _MD_FRONT_MATTER.match(raw)):  # a note may be all front matter
        raise FileRejected("the file holds no text once markup is removed")
    front = front_matter(raw) if kind == "markdown" else {}
    title = _text_field(front.get("title")) or (sections[0].title if sections else path.stem)
    return Document(path=path, kind=kind, title=title, text=text, content_hash=digest, raw=raw, sections=sections,
                    authors=_authors(front), source_kind="note" if is_readme(path) else "documentation")


def is_readme(path: Path) -> bool:
    """A repository README (README.md, or a copy named like gemm-readme.md): recorded as a note."""
    return re.search(r"(?:^|[-_.])readme$", path.stem, re.I) is not None


def front_matter(raw: str) -> dict:
    """The YAML front matter of a Markdown file as a mapping ({} when absent or not a mapping), or its metadata block in
    MultiMarkdown's form ("Title: ...", "Author: ..." lines before the first blank line, keys in lower case)."""
    m = _MD_FRONT_MATTER.match(raw)
    if not m:
        block = _MD_METADATA.match(raw)
        return {key.strip().lower(): value.strip() for key, _, value in
                (line.partition(":") for line in block.group(0).splitlines())} if block else {}
    import yaml

    try:
        data = yaml.safe_load(m.group(0).strip("-\n"))
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) else {}


def _text_field(value) -> str:
    return " ".join(str(value).split())[:200] if isinstance(value, str | int | float) else ""


def _authors(front: dict) -> str:
    value = front.get("authors", front.get("author"))
    if isinstance(value, list):
        names = [v.get("name", "") if isinstance(v, dict) else str(v) for v in value]
        return ", ".join(n for n in names if n)[:300]
    if isinstance(value, dict):
        return _text_field(value.get("name"))
    return _text_field(value)


def decode_text(data: bytes) -> str:
    """UTF-8 text (a byte-order mark is allowed); binary data and other encodings are refused."""
    if b"\x00" in data[:8192]:
        raise FileRejected("the file is binary (it holds NUL bytes), not text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FileRejected(f"the file is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}): "
                           "convert it, e.g. `iconv -f latin1 -t utf-8`") from exc
    if not text.strip():
        raise FileRejected("the file holds only whitespace")
    controls = sum(1 for ch in text[:8192] if ord(ch) < 32 and ch not in "\n\r\t\f")
    if controls > 0.05 * min(len(text), 8192):
        raise FileRejected("the file is binary (full of control characters), not text")
    return text.replace("\r\n", " \n").replace("\r", "\n")  # same length: offsets still hold


def _from_pages(path: Path, pdf, digest: str) -> Document:
    pages = pdf.pages
    starts, parts, offset = [], [], 0
    for page in pages:
        starts.append(offset)
        parts.append(page)
        offset += len(page) + len(PAGE_BREAK)
    text = PAGE_BREAK.join(parts)
    first_line = next((line.strip() for line in text.splitlines() if len(line.strip()) > 3), path.stem)
    # A page's first line is its title on slides and often a running head in papers: either way, context.
    sections = [Section(start, title[:120]) for start, page in zip(starts, pages)
                if (title := next((ln.strip() for ln in page.splitlines() if len(ln.strip()) > 3), ""))]
    return Document(path=path, kind="pdf", title=(pdf.title or first_line)[:120], text=text, content_hash=digest,
                    page_starts=starts, sections=sections, authors=pdf.author[:300],
                    source_kind="slides" if pdf.slides else "paper")


# --- cleaners: markup blanked with spaces so offsets are kept ------------------------------

def _blank(match: re.Match[str]) -> str:
    return re.sub(r"[^\n]", " ", match.group(0))


def _keep_group(group: int):
    def keep(match: re.Match[str]) -> str:
        inner = match.group(group)
        before = match.start(group) - match.start(0)
        after = match.end(0) - match.end(group)
        return " " * before + inner + " " * after
    return keep


_MD_FENCE = re.compile(r"^([ \t]*)(```|~~~)[^\n]*\n.*?^\1\2[^\n]*$", re.M | re.S)
_MD_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M)
# A setext heading: a line of text underlined with = (level 1) or - (level 2); not a table row or list item.
_MD_SETEXT = re.compile(r"^(?![ \t]*(?:[-*+>|]|\d+\.)[ \t])([^\n|]*\w[^\n|]*)\n[ \t]{0,3}(=+|-+)[ \t]*$", re.M)
_MD_FRONT_MATTER = re.compile(r"\A---\n.*?\n---[ \t]*$", re.S | re.M)
# MultiMarkdown's metadata: "Key: value" lines opening the file, one of them its title, ended by a blank line.
_METADATA_LINE = r"[A-Za-z][\w-]*[ \t]*:[^\n]*\n"
_MD_METADATA = re.compile(rf"\A(?=(?:{_METADATA_LINE})*?title[ \t]*:)(?:{_METADATA_LINE})+(?=[ \t]*\n)", re.I)
_MD_LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")
_MD_HTML_TAG = re.compile(r"</?[A-Za-z][^>\n]*>")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)  # a licence header kept in a comment is no heading
_MD_MARKS = re.compile(r"`+|\*\*|__|(?<!\w)[*_](?=\w)|(?<=\w)[*_](?!\w)")
_MD_TABLE_RULE = re.compile(r"^[ \t]*\|?[ \t]*:?-{3,}[^\n]*$", re.M)


def clean_markdown(raw: str) -> tuple[str, list[Section]]:
    text = _MD_METADATA.sub(_blank, _MD_FRONT_MATTER.sub(_blank, raw))
    text = _HTML_COMMENT.sub(_blank, text)
    text = _MD_FENCE.sub(_blank, text)
    sections = [Section(m.start(), _plain_title(m.group(2)), len(m.group(1))) for m in _MD_HEADING.finditer(text)]
    sections += [Section(m.start(), _plain_title(m.group(1)), 1 if m.group(2)[0] == "=" else 2)
                 for m in _MD_SETEXT.finditer(text)]
    # HTML headings are Markdown too (a README's centred <h1 align="center">, a page whose headings are all <h2>);
    # not a row of links (a README's "Paper | Docs | Website" bar set in <h3>).
    sections += [Section(m.start(), title, int(m.group(1))) for m in _HTML_HEADING.finditer(text)
                 if (title := _plain_title(html.unescape(m.group(2)))) and not _links_only(m.group(2))]
    sections.sort(key=lambda s: s.start)
    text = _MD_HEADING.sub(lambda m: " " * len(m.group(1)) + m.group(0)[len(m.group(1)):], text)
    text = _MD_SETEXT.sub(lambda m: m.group(1) + "\n" + " " * (len(m.group(0)) - len(m.group(1)) - 1), text)
    text = _MD_LINK.sub(_keep_group(1), text)
    text = _MD_HTML_TAG.sub(_blank, text)
    text = _MD_TABLE_RULE.sub(_blank, text)
    text = _MD_MARKS.sub(_blank, text)
    return text, sections


# A heading's underline (or overline) repeats one punctuation character; a grid table's border mixes them ("+---+").
_RST_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+:.])\1{2,}[ \t]*$", re.M)
_RST_GRID_RULE = re.compile(r"^[ \t]*\+(?:[-=]+\+)+[ \t]*$", re.M)
_RST_DIRECTIVE_BLOCK = re.compile(  # a directive, its options and its body (indented deeper)
    r"^([ \t]*)\.\. [\w:-]+::[^\n]*\n(?:[ \t]*\n|\1[ \t]+[^\n]*\n)*", re.M)
_RST_COMMENT = re.compile(r"^\.\.(?: [^\n]*)?\n(?:[ \t]+[^\n]*\n)*", re.M)
_RST_ROLE = re.compile(r":[\w:+-]+:`([^`<]*?)\s*(?:<[^>]*>)?`")
_RST_LITERAL = re.compile(r"``([^`]+)``")
_RST_LINK = re.compile(r"`([^`<]+?)\s*<[^>]*>`_{1,2}")
_RST_ADMONITIONS = ("note", "tip", "warning", "important", "caution", "hint", "attention")


def clean_rst(raw: str) -> tuple[str, list[Section]]:
    text = raw
    sections = []
    levels: dict[str, int] = {}  # rst ranks heading styles by the order they first appear
    for m in _RST_UNDERLINE.finditer(text):
        line_end = m.start() - 1
        line_start = text.rfind("\n", 0, max(line_end, 0)) + 1
        title = text[line_start:line_end].strip()
        if title and not _RST_UNDERLINE.fullmatch(title) and len(m.group(0).strip()) >= len(title) - 2:
            level = levels.setdefault(m.group(1), len(levels) + 1)
            sections.append(Section(line_start, title, level))
    text = _RST_UNDERLINE.sub(_blank, text)
    text = _RST_GRID_RULE.sub(_blank, text)
    # Admonitions hold prose worth reading; other directives (code, images, tables of options) do not.
    text = _RST_DIRECTIVE_BLOCK.sub(
        lambda m: _blank_directive_head(m) if _directive_name(m) in _RST_ADMONITIONS else _blank(m), text)
    text = _RST_COMMENT.sub(_blank, text)
    text = _RST_ROLE.sub(_keep_group(1), text)
    text = _RST_LINK.sub(_keep_group(1), text)
    text = _RST_LITERAL.sub(_keep_group(1), text)
    return text, sorted(sections, key=lambda s: s.start)


def _directive_name(match: re.Match[str]) -> str:
    return match.group(0).strip()[3:].split("::", 1)[0].strip().lower()


def _blank_directive_head(match: re.Match[str]) -> str:
    head, _, body = match.group(0).partition("\n")
    return " " * len(head) + "\n" + body


_HTML_DROP = re.compile(r"<(script|style|pre|code|head)\b.*?</\1\s*>", re.S | re.I)
_HTML_HEADING = re.compile(r"<h([1-6])\b[^>]*>(.*?)</h\1\s*>", re.S | re.I)
_HTML_BLOCK_TAG = re.compile(r"</?(p|div|li|ul|ol|br|tr|td|th|table|h[1-6]|section|article|blockquote)\b[^>]*>", re.I)
_HTML_TAG = re.compile(r"<[^>]*>")
_HTML_ENTITY = re.compile(r"&(#\d+|#x[0-9a-fA-F]+|\w+);")


_HTML_LINK = re.compile(r"<a\b[^>]*>.*?</a\s*>", re.S | re.I)


def _links_only(markup: str) -> bool:
    """Two links or more and nothing else but separators: a bar of links, not a title."""
    return len(_HTML_LINK.findall(markup)) >= 2 and not re.search(r"\w", _HTML_TAG.sub(" ", _HTML_LINK.sub(" ", markup)))


def clean_html(raw: str) -> tuple[str, list[Section]]:
    text = _HTML_DROP.sub(_blank, raw)
    text = _HTML_COMMENT.sub(_blank, text)
    sections = [Section(m.start(), _plain_title(_HTML_TAG.sub(" ", html.unescape(m.group(2)))), int(m.group(1)))
                for m in _HTML_HEADING.finditer(text)]
    # A block tag ends a sentence; it becomes a newline padded to its length.
    text = _HTML_BLOCK_TAG.sub(lambda m: "\n" + " " * (len(m.group(0)) - 1), text)
    text = _HTML_TAG.sub(_blank, text)
    text = _HTML_ENTITY.sub(lambda m: html.unescape(m.group(0)).ljust(len(m.group(0)))[: len(m.group(0))], text)
    return text, sections


def clean_text(raw: str) -> tuple[str, list[Section]]:
    return raw, []


# A GitHub emoji shortcode in a heading (":robot: MegaBlocks"): GitHub draws it, it is no part of the title.
_EMOJI_SHORTCODE = re.compile(r"(?<![\w:]):[a-z0-9_+-]+:(?![\w:])")


def _plain_title(title: str) -> str:
    """A heading as plain text: markup, inline HTML tags ("<ins>Section 4c</ins>"), links, emoji shortcodes and
    pictographs ("😌 calm") taken out; an underscore inside a word stays ("gemm_sol_final")."""
    title = _EMOJI_SHORTCODE.sub(" ", _MD_HTML_TAG.sub(" ", title))
    title = "".join(" " if unicodedata.category(c) == "So" or c == "\ufe0f" else c for c in title)
    return " ".join(re.sub(r"[`*]|(?<!\w)_+|_+(?!\w)|\[([^\]]*)\]\([^)]*\)", r"\1", title).split())[:120]


CLEANERS = {"markdown": clean_markdown, "rst": clean_rst, "html": clean_html, "text": clean_text}
