"""A copy of the checkout to run documented commands in, as a user of a fresh clone would, offline.

:func:`copy_of_the_repository` copies the checkout's files (not its run outputs) with ``.venv`` linked to this
checkout's (set up by ``make setup-dev``); :func:`offline_environment` is the caller's environment without an LLM
endpoint, Dagster home, custom-metrics variable or the outer ``make``'s flags.
"""
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: What a run leaves in a checkout, and what the copy does not need.
NOT_COPIED = {".git", ".venv", "out", "datasets", ".rag_eval_cache", "testsets", "build", "site", ".docs_src",
              ".mypy_src", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis", "__pycache__", "traces",
              "gate-report"}


def copy_of_the_repository(tmp_path: Path) -> Path:
    """``tmp_path/repo``: the checkout's files (not its run outputs), modification times kept, ``.venv`` linked;
    ``make`` finds the environment set up: ``pyproject.toml`` and ``requirements.lock`` dated before
    ``.venv/bin/rag-eval``. Skips the test when the checkout has no ``.venv``."""
    venv = ROOT / ".venv"
    if not (venv / "bin" / "rag-eval").exists():
        pytest.skip("no .venv in the checkout: `make setup-dev` first")
    copy = tmp_path / "repo"
    shutil.copytree(ROOT, copy, symlinks=True, ignore=lambda folder, names: [n for n in names if n in NOT_COPIED])
    for leftover in (copy / "dagster_home").iterdir():  # the committed dagster.yaml only
        if leftover.name != "dagster.yaml":
            shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
    (copy / ".venv").symlink_to(venv, target_is_directory=True)
    set_up = (venv / "bin" / "rag-eval").stat().st_mtime
    for name in ("pyproject.toml", "requirements.lock"):
        os.utime(copy / name, (set_up - 1, set_up - 1))
    return copy


def offline_environment() -> dict[str, str]:
    """``os.environ`` without ``OPENAI_*``, ``EMBEDDING_*``, ``RAG_EVAL_*``, ``DAGSTER_*`` and ``make``'s own
    variables: commands judge offline, in the copy's ``dagster_home/``, as in a fresh shell."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("OPENAI_", "EMBEDDING_", "RAG_EVAL_", "DAGSTER_", "MAKE", "MFLAGS"))}
