"""The documentation's commands: the Quickstart page's runnable shell blocks run as a user would type them, and
the README's first screen is the Quickstart's.

A shell block of ``docs/quickstart.md`` is *runnable* when the line before its opening fence is
``<!-- quickstart: runnable -->`` (an HTML comment, invisible on the site). Each of its lines is run in turn with
bash, in a copy of the repository whose ``.venv`` is a link to this checkout's (set up by ``make setup-dev``), with no
LLM endpoint, Dagster home or custom-metrics variable from the caller's environment: every command must exit 0,
and a line whose comment quotes output (``# "dataset version … is up to date"``) must print each part of the
quote between the ``…``.
"""
import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.repo_copy import copy_of_the_repository, offline_environment

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "docs" / "quickstart.md"
MARKER = "<!-- quickstart: runnable -->"


def shell_blocks(text: str) -> list[tuple[bool, list[str]]]:
    """``(runnable, lines)`` of each ```bash / ```sh block of a Markdown text, in order."""
    blocks, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if re.fullmatch(r"```(bash|sh)", line.strip()):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            blocks.append((i > 0 and lines[i - 1].strip() == MARKER, lines[i + 1:end]))
    return blocks


def commands(lines: list[str]) -> list[str]:
    """The commands of a block's lines: comments and comment-only lines left out."""
    return [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]


def test_the_blocks_and_their_commands_are_read_as_a_user_reads_them():
    text = ("intro\n" + MARKER + "\n```bash\nmake run    # set up\n            # a note\n```\n\n"
            "```sh\nmake test\n```\n" + MARKER + "\n\n```bash\necho not marked: a blank line between\n```\n")
    blocks = shell_blocks(text)
    assert [runnable for runnable, _ in blocks] == [True, False, False]
    assert [commands(lines) for _, lines in blocks] == [["make run"], ["make test"], ["echo not marked: a blank line between"]]


def test_the_readme_first_screen_is_the_quickstarts_first_commands():
    readme_first = shell_blocks((ROOT / "README.md").read_text(encoding="utf-8"))[0][1]
    assert commands(readme_first) == ["make run", "make test"]
    quickstart = [line for _, lines in shell_blocks(QUICKSTART.read_text(encoding="utf-8")) for line in lines]
    # The same lines, comments included (what each command does is stated once, the same way).
    assert [line for line in readme_first if line in quickstart] == readme_first
    assert commands(quickstart)[:2] == ["make run", "make test"]
    # `make test` is not run here (it runs this file); `make run` is.
    runnable = [c for ok, lines in shell_blocks(QUICKSTART.read_text(encoding="utf-8")) if ok for c in commands(lines)]
    assert runnable[0] == "make run" and "make test" not in runnable


@pytest.mark.slow
def test_every_runnable_quickstart_command_runs_offline_in_a_copy_of_the_repository(tmp_path):
    copy = copy_of_the_repository(tmp_path)
    env = offline_environment()
    ran = []
    for runnable, lines in shell_blocks(QUICKSTART.read_text(encoding="utf-8")):
        for line in lines if runnable else ():
            command = line.split("#", 1)[0].strip()
            if not command:
                continue
            done = subprocess.run(["bash", "-c", command], cwd=copy, env=env, capture_output=True, text=True,
                                  timeout=600)
            output = done.stdout + done.stderr
            assert done.returncode == 0, f"{command!r} exited {done.returncode}:\n{output[-3000:]}"
            for quoted in re.findall(r'"([^"]+)"', line.split("#", 1)[1] if "#" in line else ""):
                for part in filter(None, (p.strip() for p in quoted.split("…"))):
                    assert part in output, f"{command!r} did not print {part!r}:\n{output[-3000:]}"
            ran.append(command)
    assert ran[0] == "make run" and len(ran) >= 2
    # make run: the summary printed and written, the five core metrics scored by the offline judge.
    (summary,) = (copy / "out").glob("*/summary.json")
    written = json.loads(summary.read_text(encoding="utf-8"))
    assert set(written["metrics"]) == {"faithfulness", "answer_relevancy", "context_relevancy", "context_recall",
                                       "context_precision"}
    assert all(m["judge"].startswith("offline") for m in written["metrics"].values())
    assert written["total"] == 30  # examples/fiqa/samples.jsonl's lines


@pytest.mark.slow
def test_the_readme_python_example_prints_the_numbers_it_quotes(monkeypatch):
    """The README's Python block run as written, offline: each ``print(x)  # N…`` prints N (to its digits)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## From Python.*?```python\n(.*?)```", text, re.S)[1]
    quoted = re.compile(r"^print\((.+)\)\s+# (-?\d+(?:\.\d+)?)\b")
    checks, lines = [], []
    for line in block.splitlines():
        if match := quoted.match(line):
            lines.append(f"_checks.append(({match[1]}, {match[2]!r}))")
        else:
            lines.append(line)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(ROOT)
    exec("\n".join(lines), {"_checks": checks})
    assert len(checks) == 3
    for value, expected in checks:
        digits = len(expected.split(".")[1]) if "." in expected else 0
        assert round(float(value), digits) == float(expected), (value, expected)
