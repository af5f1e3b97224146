"""MkDocs hook: a repository file shown in full on a page, read when the site is built.

A page line ``<!-- example-file: examples/ci/github-actions.yml -->`` becomes a code block holding that file
(the path relative to the repository's root, under ``examples/``; the block's language is the file's suffix),
so that a page showing a file cannot drift from it. A marker naming a missing file, or one outside ``examples/``,
stops the build with the page and the path.
"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- example-file: (\S+) -->$", re.M)


def _block(match: re.Match, page: str) -> str:
    path = (ROOT / match[1]).resolve()
    if not path.is_relative_to(ROOT / "examples") or not path.is_file():
        raise ValueError(f"{page}: <!-- example-file: {match[1]} -->: no such file under examples/")
    return f"```{path.suffix.lstrip('.')}\n{path.read_text(encoding='utf-8').rstrip()}\n```"


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Replace each example-file marker of a page with its file's content; other pages pass through."""
    return MARKER.sub(lambda match: _block(match, page.file.src_uri), markdown)
