"""The documentation's commands: the Quickstart page's runnable shell blocks run as a user would type them, and
the README's first screen is the Quickstart's.

A shell block of ``docs/quickstart.md`` is *runnable* when the line before its opening fence is
``<!-- quickstart: runnable -->`` (an HTML comment, invisible on the site). Each of its lines is run in turn with
bash, in a copy of the repository whose ``.venv`` is a link to this checkout's (set up by ``make setup-dev``), with no
LLM endpoint, Dagster home or custom-metrics variable from the caller's environment: every command must exit 0,
and a line whose comment quotes output (``# "dataset version … is up to date"``) must print each part of the
quote between the ``…``.
"""
import itertools
import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.repo_copy import copy_of_the_repository, offline_environment

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "docs" / "quickstart.md"
MARKER = "<!-- quickstart: runnable -->"


#: Before a block whose commands run in an environment of their own, not this clone's ``.venv`` (a deployment's).
ELSEWHERE = "<!-- commands: another environment -->"
ACTIVATE = "source .venv/bin/activate"


def shell_blocks(text: str, marker: str = MARKER) -> list[tuple[bool, list[str]]]:
    """``(marked, lines)`` of each ```bash / ```sh block of a Markdown text, in order: ``marked`` when the line
    before its opening fence is ``marker``."""
    blocks, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if re.fullmatch(r"```(bash|sh)", line.strip()):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            blocks.append((i > 0 and lines[i - 1].strip() == marker, lines[i + 1:end]))
    return blocks


def commands(lines: list[str]) -> list[str]:
    """The commands of a block's lines: comments and comment-only lines left out."""
    return [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]


def programs(command: str) -> list[str]:
    """The program each simple command of a command line starts (split at ``&&``, ``||``, ``;`` and ``|``),
    past its leading ``NAME=value`` assignments."""
    found = []
    for part in re.split(r"&&|\|\||;|\|", command):
        words = list(itertools.dropwhile(lambda word: re.fullmatch(r"\w+=\S*", word), part.split()))
        found += words[:1]
    return found


def test_the_programs_of_a_command_line_are_read_as_the_shell_reads_them():
    assert programs("OPENAI_BASE_URL=http://x/v1 OPENAI_API_KEY=sim rag-eval run --threshold faithfulness=0.7") == \
        ["rag-eval"]
    assert programs("cd /srv/x && dagster api grpc -p 4266; .venv/bin/rag-eval gate | tee log") == \
        ["cd", "dagster", ".venv/bin/rag-eval", "tee"]


def test_every_page_calls_the_clones_commands_as_they_run_after_the_readmes_setup():
    """After the README's setup (``make run``: ``.venv``), a program found only in ``.venv/bin`` (``rag-eval``,
    ``dagster``, ``mkdocs``, the environment's ``python`` and ``pip``...) runs as a page writes it only as
    ``.venv/bin/NAME``, or after ``source .venv/bin/activate`` on the page; a bare one would be "command not
    found", or another Python without the project. Every ``.venv/bin/NAME`` a page writes exists. A block
    marked ``<!-- commands: another environment -->`` (a deployment's own) is not read."""
    venv = ROOT / ".venv" / "bin"
    if not (venv / "rag-eval").exists():
        pytest.skip("no .venv in the checkout: `make setup-dev` first")
    installed = {path.name for path in venv.iterdir()}
    wrong = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        activated = False
        for (elsewhere, lines) in shell_blocks(text, ELSEWHERE):
            # A line ending in a backslash goes on on the next one.
            for command in commands("\n".join(lines).replace("\\\n", " ").splitlines()):
                activated = activated or command == ACTIVATE
                for program in [] if elsewhere else programs(command):
                    name = program.removeprefix(".venv/bin/")
                    if (name == program and name in installed and not activated) or \
                            (name != program and name not in installed):
                        wrong.append(f"{page.relative_to(ROOT)}: {program} in {command!r}")
    assert not wrong, "not as they run after the setup:\n" + "\n".join(wrong)


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
