"""MkDocs hook: the CLI reference page, rendered at build time from ``rag-eval``'s own argparse parser.

``docs/reference/cli.md`` holds the marker ``<!-- cli-reference -->``; this hook replaces it with the usage,
description and options of ``rag-eval`` and of every subcommand (nested ones too: ``annotate export``), as
``rag_eval.orchestration.cli.build_parser()`` builds them, so the page cannot drift from the code.

It also lays out ``.docs_src/rag_eval/`` (links to ``metrics/``, ``assets/``, ``orchestration/``) for
mkdocstrings, which reads the source statically and cannot follow the editable install's import hook that
maps the three folders to ``rag_eval.*`` (``[tool.setuptools] package-dir``; mypy gets the same link).
"""
import argparse
import os
import warnings
from pathlib import Path

MARKER = "<!-- cli-reference -->"
ROOT = Path(__file__).resolve().parents[2]


def _link_sources() -> None:
    """Link ``.docs_src/rag_eval/<pkg>`` to the repository's folders (the path mkdocs.yml gives mkdocstrings).
    Called as MkDocs loads this hook, before it validates mkdocstrings' options: a path missing then is
    left out of the handler's search paths."""
    package = ROOT / ".docs_src" / "rag_eval"
    package.mkdir(parents=True, exist_ok=True)
    for folder in ("metrics", "assets", "orchestration"):
        link = package / folder
        if not link.is_symlink():
            link.symlink_to(Path("..", "..", folder), target_is_directory=True)


_link_sources()

def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    """``(name, parser, help)`` of each subcommand of ``parser``, in the order they were added."""
    found = []
    for action in parser._actions:  # argparse has no public accessor for its subparsers
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            found += [(name, sub, helps.get(name, "")) for name, sub in action.choices.items()]
    return found


def _render(parser: argparse.ArgumentParser, path: str, helptext: str, level: int) -> list[str]:
    """The section of one command: heading, help, then its ``--help`` text in a code block."""
    os.environ["COLUMNS"] = "100"  # argparse wraps at the terminal's width: the same page on every machine
    lines = [f"{'#' * level} `{path}`", ""]
    if helptext:
        lines += [helptext[0].upper() + helptext[1:] + ".", ""]
    lines += ["```text", parser.format_help().rstrip(), "```", ""]
    for name, sub, subhelp in _subcommands(parser):
        lines += _render(sub, f"{path} {name}", subhelp, min(level + 1, 4))
    return lines


def cli_reference() -> str:
    """Markdown of every ``rag-eval`` command's usage and options."""
    with warnings.catch_warnings():  # Dagster's deprecation notices while the CLI's modules import
        warnings.simplefilter("ignore")
        from rag_eval.orchestration.cli import build_parser

        parser = build_parser()
    return "\n".join(_render(parser, "rag-eval", "", 2))


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Fill the CLI reference page's marker; other pages pass through."""
    return markdown.replace(MARKER, cli_reference()) if MARKER in markdown else markdown
