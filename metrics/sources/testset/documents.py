"""A folder of documents read into text and split into chunks, the units a test set names as sources.

Plain text (``.txt``), Markdown (``.md``, ``.markdown``), HTML (``.html``, ``.htm``; script,
style and head left out) and PDF (``.pdf``, the text layer of each page through ``pypdf``)
are read; any other file is skipped with its reason, and so is a file that cannot be read
(not UTF-8, a damaged PDF or one that needs a password, no text) or is a copy of an earlier
one. A document is split into paragraphs at blank lines, each normalised as RAG text
(``rag_eval.metrics.text.normalise_rag_text``: Markdown marks, HTML entities and citation markers
go); a paragraph under ``HEADING_TOKENS`` (a heading) ends as a sentence and opens the next
one (short lines closing a document join its last chunk); paragraphs are packed into chunks
of at most ``chunk_tokens`` estimated tokens (UTF-8 bytes / 4: about 1,000 English or 340
Chinese characters at the default 256), never more: a longer paragraph is cut at sentence
ends, a longer sentence at spaces, a longer word (or run of Chinese) between characters. A
chunk's id is ``<path in the folder>#<n>`` (``guide/install.md#2``), counted from 1, so the
same folder always gives the same ids.
"""
from __future__ import annotations

import hashlib
import html
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from rag_eval.metrics.core.extras import require
from rag_eval.metrics.judges.plan import estimate_tokens
from rag_eval.metrics.text import normalise_rag_text, split_sentences
from rag_eval.metrics.errors import NotFoundError, SettingsError

SUFFIXES = {".txt": "text", ".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html",
            ".pdf": "pdf"}
#: Chunk size, in estimated tokens, unless the caller gives another.
CHUNK_TOKENS = 256
#: A paragraph of fewer estimated tokens (a heading) is joined to the next one.
HEADING_TOKENS = 12


@dataclass(frozen=True)
class Document:
    """One file of the folder: ``id`` its path inside the folder (``/``-separated), ``text``."""

    id: str
    text: str


@dataclass(frozen=True)
class Chunk:
    """A piece of a document: ``id`` (``<document id>#<n>``), ``document_id``, ``text``."""

    id: str
    document_id: str
    text: str


class _HTMLText(HTMLParser):
    """The text of an HTML page, a blank line at each block element, without script, style and head."""

    BLOCKS = {"p", "div", "section", "article", "li", "ul", "ol", "table", "tr", "h1", "h2", "h3", "h4", "h5",
              "h6", "blockquote", "pre", "br", "hr", "main", "header", "footer", "dd", "dt"}
    HIDDEN = {"script", "style", "head", "noscript", "template"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag, attrs):
        if tag in self.HIDDEN:
            self.hidden += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n\n# " if re.fullmatch(r"h[1-6]", tag) else "\n\n")  # a heading as Markdown's

    def handle_endtag(self, tag):
        if tag in self.HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag in self.BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data):
        if not self.hidden:  # entities escaped again: normalising decodes them after taking tags out ("&lt;b&gt;")
            self.parts.append(html.escape(re.sub(r"\s+", " ", data), quote=False))


def _pdf_text(path: Path) -> str:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError

    reader = PdfReader(path)
    try:
        opened = not reader.is_encrypted or reader.decrypt("")  # an owner password alone: the empty one opens it
    except DependencyError as exc:  # AES without the cryptography package
        raise ValueError(f"the PDF is encrypted ({exc})") from None
    if not opened:
        raise ValueError("the PDF is encrypted (it needs a password to open)")
    return "\n\n".join(page.extract_text() or "" for page in reader.pages)


def read_text(path: Path) -> str:
    """The text of one file by its suffix (see the module docstring).

    Raises
    ------
    ValueError
        For an unsupported suffix, text that is not UTF-8, or a PDF that cannot be read (or
        pypdf, the ``testset`` extra, is not installed: ``rag_eval.metrics.core.extras.MissingExtra``).
    """
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"not a supported document type (one of {', '.join(sorted(SUFFIXES))})")
    if kind == "pdf":
        require("pypdf", "testset", "Reading PDF documents")  # a MissingExtra is a ValueError: the file is skipped
        from pypdf.errors import PdfReadError

        try:
            return _pdf_text(path)
        except PdfReadError as exc:
            raise ValueError(f"unreadable PDF: {exc}") from None
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 (byte {exc.start + 1}); save it as UTF-8") from None
    if kind == "html":
        parser = _HTMLText()
        parser.feed(text)
        parser.close()
        text = "".join(parser.parts)
    return text


def read_documents(folder: str | Path) -> tuple[list[Document], dict[str, str]]:
    """Every document under ``folder`` (recursively, in path order; hidden files and folders
    such as ``.git/`` left out; a copy of an earlier one, the same text once normalised, skipped)
    and the files skipped, ``{path: reason}``.

    Raises
    ------
    NotFoundError
        When ``folder`` is not a folder.
    """
    root = Path(folder)
    if not root.is_dir():
        raise NotFoundError(f"documents folder not found: {root}")
    documents: list[Document] = []
    skipped: dict[str, str] = {}
    first: dict[bytes, str] = {}
    files = [p for p in root.rglob("*") if p.is_file()
             and not any(part.startswith(".") for part in p.relative_to(root).parts)]  # no .git/, .DS_Store
    for path in sorted(files):
        name = path.relative_to(root).as_posix()
        try:
            text = read_text(path)
        except (ValueError, OSError) as exc:
            skipped[name] = str(exc)
            continue
        content = " ".join(normalise_rag_text(text).split())
        if not content:
            skipped[name] = "no text (a scanned PDF needs OCR first)" if path.suffix.lower() == ".pdf" else "no text"
            continue
        digest = hashlib.sha256(content.encode("utf-8")).digest()
        if digest in first:  # a copy's sentences would all be "shared", its chunks a multi-hop pair of twins
            skipped[name] = f"a copy of {first[digest]} (the same text)"
            continue
        first[digest] = name
        documents.append(Document(name, text))
    return documents, skipped


#: How a piece over the limit is cut, in turn: at sentence ends, at spaces, between characters (Chinese).
_CUTS = ((split_sentences, " "), (str.split, " "), (list, ""))


def _pieces(text: str, limit: int, level: int = 0) -> list[str]:
    """``text`` cut into pieces of at most ``limit`` tokens: at sentence ends, a longer
    sentence at spaces, a longer word (or a run of Chinese) between characters."""
    if estimate_tokens(text) <= limit or level == len(_CUTS):
        return [text]
    cut, joiner = _CUTS[level]
    pieces: list[str] = []
    size = 0  # UTF-8 bytes of pieces[-1]
    for unit in cut(text):
        for part in _pieces(unit, limit, level + 1):
            grown = size + len(joiner) + len(part.encode("utf-8"))
            if pieces and -(-grown // 4) <= limit:  # estimate_tokens of the joined text
                pieces[-1] += joiner + part
                size = grown
            else:
                pieces.append(part)
                size = len(part.encode("utf-8"))
    return pieces


def _ended(line: str) -> str:
    """``line`` (a heading) ended as a sentence: with "。" after Chinese or Japanese (also in place of
    the "." that normalising a Markdown heading puts there), else with "." unless it ends in a mark."""
    if re.search(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]\.?$", line):
        return line.removesuffix(".") + "。"
    return line if re.search(r"[.!?:。！？：]$", line) else line + "."


def chunk_document(document: Document, chunk_tokens: int = CHUNK_TOKENS) -> list[Chunk]:
    """``document`` in chunks of at most ``chunk_tokens`` estimated tokens (see the module docstring).

    Raises
    ------
    ValueError
        For ``chunk_tokens`` below 32.
    """
    if chunk_tokens < 32:
        raise SettingsError(f"chunk size {chunk_tokens}: give at least 32 tokens")
    paragraphs = [p for p in (normalise_rag_text(block).replace("\n", " ") for block in
                              re.split(r"\n\s*\n", document.text.replace("\r\n", "\n"))) if p.strip()]
    texts: list[str] = []

    def pack(text: str) -> None:
        for piece in _pieces(text, chunk_tokens):
            if texts and estimate_tokens(texts[-1] + "\n" + piece) <= chunk_tokens:
                texts[-1] += "\n" + piece
            else:
                texts.append(piece)

    heading = ""
    for paragraph in paragraphs:
        if estimate_tokens(paragraph) < HEADING_TOKENS:  # a heading: ended as a sentence, joined to what follows
            heading = f"{heading} {_ended(paragraph)}".strip()
            continue
        pack(f"{heading} {paragraph}".strip() if heading else paragraph)
        heading = ""
    if heading:  # short lines closing the document: with the last chunk when they fit, else a chunk of their own
        pack(heading)
    return [Chunk(f"{document.id}#{n}", document.id, text) for n, text in enumerate(texts, start=1)]


def chunk_documents(documents: list[Document], chunk_tokens: int = CHUNK_TOKENS) -> list[Chunk]:
    """Every document's chunks, in document order (:func:`chunk_document`)."""
    return [chunk for document in documents for chunk in chunk_document(document, chunk_tokens)]
