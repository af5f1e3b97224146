"""The CI recipes of ``examples/ci/`` run as their CI would run them, offline, on the FiQA example.

Each file is read with PyYAML (a dependency of Dagster's, so in every install) and its commands run in order,
each with bash as the CI runs it, in a copy of the repository (``tests/repo_copy.py``: ``.venv`` linked, so the
file's ``make setup`` finds it set up and does nothing). Pipelines one after the other, as CI sees them (GitLab's
the first and the last: its unchanged request would run what GitHub's does, 13 s of CPU more):

1. the default branch (``main``): the FiQA example evaluated and tagged as the baseline;
2. a pull (merge) request leaving the dataset unchanged: the gate passes (exit 0) and writes ``report.md``;
3. a pull request whose dataset is ``examples/gate/candidate`` (15 of the 30 responses swapped for answers to
   other questions): ``rag-eval run`` exits 0, the gate step exits 4 (``GATE_FAILED``) and ``report.md`` is posted.

Between pipelines only what the file's cache keeps survives: each pipeline starts from a fresh copy of the
repository plus the folders the file caches, restored by the file's keys as the CI service would (GitHub: the
exact key, else the newest entry starting with a restore key; GitLab: the key, else a fallback key, with its
protected/non-protected suffix). A cache missing ``datasets/`` (tags.json) or ``out/`` fails the gate.

Not run, because they cannot run offline or the test stands in for them: GitHub's ``uses:`` steps
(``actions/checkout``: the copy is the checkout; ``actions/setup-python``: the test's ``.venv``;
``actions/cache/restore`` and ``save``: emulated from their ``with:``), its ``gh pr comment`` step (GitHub's API),
GitLab's ``image:`` (this machine's environment is used) and the artifact upload (its paths must exist).

The two files' pipelines run side by side (two processes at a time): five ``rag-eval run`` of about 13 s of CPU
each, about 125 s of CPU in all with the gates, tags and copies, so about a minute on two idle cores (142 s to
250 s measured on two cores shared at a load of 5 to 8).
"""
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from rag_eval.orchestration.gate_cli import GATE_FAILED
from tests.repo_copy import ROOT, copy_of_the_repository, offline_environment

GITHUB = ROOT / "examples" / "ci" / "github-actions.yml"
GITLAB = ROOT / "examples" / "ci" / "gitlab-ci.yml"
REGRESSED = ROOT / "examples" / "gate" / "candidate" / "samples.jsonl"
#: The pipelines: (branch, a pull/merge request?, the dataset file it carries, or None: unchanged).
PIPELINES = (("main", False, None), ("feature", True, None), ("feature", True, REGRESSED))
#: What a pipeline's cache can hold: the folders each file must name.
STATE = ["dagster_home/", "out/", "datasets/", ".rag_eval_cache/"]


def bash(command: str, cwd: Path, env: dict[str, str]) -> int:
    """Exit status of ``command`` run as both CI services run a script: bash, errexit and pipefail."""
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", command], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    if done.returncode:
        print(f"$ {command}\n-> {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.returncode


def checkout(tmp_path: Path, dataset: Path | None) -> Path:
    """A fresh checkout of the branch: the repository, with ``dataset`` as the FiQA example's file if given."""
    shutil.rmtree(tmp_path / "repo", ignore_errors=True)
    repo = copy_of_the_repository(tmp_path)
    if dataset:
        shutil.copyfile(dataset, repo / "examples" / "fiqa" / "samples.jsonl")
    return repo


def save(cache: dict[str, Path], key: str, repo: Path, paths: list[str], store: Path) -> None:
    """Store the cached ``paths`` of ``repo`` under ``key`` (a new entry, the newest last)."""
    entry = store / f"{len(cache)}"
    for path in paths:
        if (repo / path).exists():
            shutil.copytree(repo / path, entry / path)
    entry.mkdir(parents=True, exist_ok=True)
    cache[key] = entry


def restore(entry: Path | None, repo: Path) -> None:
    """The folders of a cache ``entry`` put into ``repo`` (nothing when no entry matched)."""
    if entry is not None:
        shutil.copytree(entry, repo, dirs_exist_ok=True)


# --- GitHub Actions ---------------------------------------------------------------------------------------------

def github_expand(text: str, context: dict[str, str]) -> str:
    """``${{ expression }}`` replaced from ``context``; an expression the test does not know fails it."""
    return re.sub(r"\$\{\{\s*(.+?)\s*\}\}", lambda m: context[m[1]], str(text))


def github_if(condition: str | None, context: dict[str, str], failed: bool, repo: Path) -> bool:
    """A step's ``if:`` as GitHub evaluates the ``&&`` of these terms; without a status function, ``success()``."""
    terms = condition.split(" && ") if condition else []
    results = []
    for term in terms:
        if term == "always()":
            continue
        if event := re.fullmatch(r"github\.event_name == '(\w+)'", term):
            results.append(context["github.event_name"] == event[1])
        elif files := re.fullmatch(r"hashFiles\('([^']+)'\) != ''", term):
            results.append((repo / files[1]).is_file())
        else:
            raise AssertionError(f"the test does not know the condition {term!r}")
    return ("always()" in terms or not failed) and all(results)


def run_github(tmp_path: Path, pipelines=PIPELINES) -> list[dict]:
    """The workflow's one job in each pipeline: per pipeline ``{step name: exit status or "skipped"}``, the job
    summary, the report and the saved cache entry."""
    workflow = yaml.safe_load(GITHUB.read_text(encoding="utf-8"))
    (job,) = workflow["jobs"].values()
    cache: dict[str, Path] = {}
    passes = []
    for number, (branch, request, dataset) in enumerate(pipelines, 1):
        context = {"github.event_name": "pull_request" if request else "push", "github.run_id": str(number),
                   "github.run_attempt": "1", "github.head_ref || github.ref_name": branch,
                   "github.event.repository.default_branch": "main"}  # the gh step's token and number: not run
        repo = checkout(tmp_path, dataset)
        summary = tmp_path / f"summary-{number}.md"
        env = {**offline_environment(), "GITHUB_STEP_SUMMARY": str(summary),
               **{k: github_expand(v, context) for k, v in workflow["env"].items()}}
        outcome: dict[str, int | str] = {}
        failed = False
        for step in job["steps"]:
            name = step.get("name", step.get("uses"))
            if not github_if(step.get("if"), context, failed, repo):
                outcome[name] = "skipped"
            elif step.get("uses", "").startswith("actions/cache/"):
                args = {k: github_expand(v, context) for k, v in step["with"].items()}
                paths, key = args["path"].split(), args["key"]
                assert paths == STATE, f"{name}: caches {paths}"
                if step["uses"].startswith("actions/cache/restore"):
                    newest = (cache[k] for p in args["restore-keys"].split() for k in reversed(cache) if k.startswith(p))
                    restore(cache[key] if key in cache else next(newest, None), repo)
                elif key not in cache:  # an entry is never overwritten
                    save(cache, key, repo, paths, tmp_path / "github-cache")
                outcome[name] = 0
            elif "uses" in step or step["run"].startswith("gh "):
                outcome[name] = "not run"
            else:
                step_env = {**env, **{k: github_expand(v, context) for k, v in step.get("env", {}).items()}}
                outcome[name] = bash(step["run"], repo, step_env)
                failed = failed or (outcome[name] != 0 and not step.get("continue-on-error"))
        passes.append({"outcome": outcome, "summary": summary.read_text(encoding="utf-8") if summary.exists() else None,
                       "report": report(repo), "version": env["VERSION"], "saved": cache[next(reversed(cache))]})
    return passes


# --- GitLab CI --------------------------------------------------------------------------------------------------

def merged(base: dict, extra: dict) -> dict:
    """``extra`` over ``base``, hashes merged key by key (GitLab's ``extends``)."""
    return {**base, **{k: merged(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
                       for k, v in extra.items()}}


def gitlab_expand(text: str, variables: dict[str, str]) -> str:
    """``$NAME`` and ``${NAME}`` from ``variables``; a variable the test does not define fails it."""
    return re.sub(r"\$\{?(\w+)\}?", lambda m: variables[m[1]], str(text))


def gitlab_rule(condition: str, variables: dict[str, str]) -> bool:
    """A rule's ``if:`` of the form ``$A == $B`` or ``$A == "text"`` (an unset variable is null)."""
    match = re.fullmatch(r'\$(\w+) == (?:\$(\w+)|"([^"]*)")', condition)
    assert match, f"the test does not know the rule {condition!r}"
    right = variables.get(match[2]) if match[2] else match[3]
    return variables.get(match[1]) == right


def run_gitlab(tmp_path: Path, pipelines=PIPELINES) -> list[dict]:
    """The job the rules select in each pipeline: per pipeline its name, the lines run (a ``rag-eval`` line by its
    subcommand) with their exit status, the report, the artifacts' paths and the saved cache entry."""
    pipeline = yaml.safe_load(GITLAB.read_text(encoding="utf-8"))
    jobs = {name: merged(pipeline[job["extends"]], job) if "extends" in job else job
            for name, job in pipeline.items() if not name.startswith(".") and name != "variables"}
    cache: dict[str, Path] = {}
    passes = []
    for number, (branch, request, dataset) in enumerate(pipelines, 1):
        ci = {"CI_DEFAULT_BRANCH": "main", "CI_COMMIT_REF_SLUG": branch, "CI_PIPELINE_ID": str(number),
              "CI_PIPELINE_SOURCE": "merge_request_event" if request else "push"}
        ci |= {"CI_MERGE_REQUEST_IID": "7"} if request else {"CI_COMMIT_BRANCH": branch}
        selected = {n: j for n, j in jobs.items() if any(gitlab_rule(r["if"], ci) for r in j["rules"])}
        assert len(selected) == 1, f"pipeline {number} runs {list(selected)}"
        ((name, job),) = selected.items()
        variables = {**ci, "CI_JOB_ID": f"{number}0"}
        variables |= {k: gitlab_expand(v, variables) for k, v in pipeline["variables"].items()}
        repo = checkout(tmp_path, dataset)
        spec = job["cache"]
        assert spec["paths"] == STATE, f"{name}: caches {spec['paths']}"
        # The default branch is protected: its keys carry -protected unless the cache is unprotected.
        suffix = "-non_protected" if spec.get("unprotect") or branch != "main" else "-protected"
        key = gitlab_expand(spec["key"], variables) + suffix
        keys = [key, *(gitlab_expand(k, variables) + suffix for k in spec.get("fallback_keys", []))]
        restore(next((cache[k] for k in keys if k in cache), None), repo)
        env = {**offline_environment(), **variables}
        ran: list[tuple[str, int]] = []  # (line, exit status) up to the first that fails, as the runner stops
        for line in [*job.get("before_script", []), *job["script"]]:
            ran.append((line.split()[1] if line.startswith(".venv/bin/rag-eval") else line, bash(line, repo, env)))
            if ran[-1][1]:
                break
        status = ran[-1][1]
        if status == 0 or spec.get("when") == "always":
            save(cache, key, repo, spec["paths"], tmp_path / f"gitlab-cache-{number}")
        artifacts = job.get("artifacts", {})
        kept = artifacts.get("paths", []) if status == 0 or artifacts.get("when") == "always" else []
        passes.append({"job": name, "ran": ran, "report": report(repo), "version": variables["VERSION"],
                       "artifacts": [p for p in kept if (repo / p).is_file()], "wanted": kept,
                       "exposed": artifacts.get("expose_as"), "saved": cache.get(key)})
    return passes


def report(repo: Path) -> str | None:
    path = repo / "gate-report" / "report.md"
    return path.read_text(encoding="utf-8") if path.is_file() else None


def test_the_how_to_page_gives_both_files_commands_as_they_are_written():
    """``docs/how-to/ci.md`` shows each file in full (its ``example-file`` markers) and, in its steps, each
    ``rag-eval`` command as the files write it: the same commands in both files."""
    page = (ROOT / "docs" / "how-to" / "ci.md").read_text(encoding="utf-8")
    (job,) = yaml.safe_load(GITHUB.read_text(encoding="utf-8"))["jobs"].values()
    github = [step["run"] for step in job["steps"] if "rag-eval" in step.get("run", "")]
    gitlab = [line for name, job in yaml.safe_load(GITLAB.read_text(encoding="utf-8")).items()
              if isinstance(job, dict) for line in job.get("script", []) if "rag-eval" in line]
    assert sorted(set(github)) == sorted(set(gitlab)) and len(github) == 3
    assert all(command in page for command in github)
    for path in (GITHUB, GITLAB):
        assert f"<!-- example-file: {path.relative_to(ROOT).as_posix()} -->" in page


@pytest.fixture(scope="module")
def pipelines(tmp_path_factory):
    """Both files' three pipelines, the two files side by side."""
    with ThreadPoolExecutor(2) as pool:
        github = pool.submit(run_github, tmp_path_factory.mktemp("github"))
        gitlab = pool.submit(run_gitlab, tmp_path_factory.mktemp("gitlab"), (PIPELINES[0], PIPELINES[-1]))
        return {"github": github.result(), "gitlab": gitlab.result()}


@pytest.mark.slow
def test_github_actions_tags_main_passes_an_unchanged_pull_request_and_fails_a_regressed_one(pipelines):
    main, unchanged, regressed = pipelines["github"]
    cache_steps = {"Restore the evaluation state": 0, "Save the evaluation state": 0}
    not_run = {"actions/checkout@v4": "not run", "actions/setup-python@v5": "not run"}
    assert main["outcome"] == {**not_run, **cache_steps, "Set up (.venv, what running needs)": 0, "Evaluate": 0,
                               "Gate against the baseline": "skipped", "Make this version the baseline": 0,
                               "Post report.md to the job summary": "skipped",
                               "Post report.md on the pull request": "skipped"}
    assert main["report"] is None and main["summary"] is None
    for request, gate in ((unchanged, 0), (regressed, GATE_FAILED)):
        assert request["outcome"] == {**not_run, **cache_steps, "Set up (.venv, what running needs)": 0,
                                      "Evaluate": 0,  # a regressed candidate too: the gate step decides
                                      "Gate against the baseline": gate, "Make this version the baseline": "skipped",
                                      "Post report.md to the job summary": 0,
                                      "Post report.md on the pull request": "not run"}
        assert request["summary"] == request["report"]  # the job summary is report.md
        # Gated against the tagged baseline, the default branch's version, restored from its cache.
        assert f"`{request['version']}` vs baseline `{main['version']}`" in request["report"]
        # The state saved whatever the gate said: the candidate's results and the tag kept for the next run.
        assert (request["saved"] / "out" / request["version"] / "results.parquet").is_file()
        assert main["version"] in (request["saved"] / "datasets" / "tags.json").read_text(encoding="utf-8")
    assert unchanged["report"].startswith("## Regression gate PASSED")
    assert regressed["report"].startswith("## Regression gate FAILED")
    assert "**faithfulness regressed: " in regressed["report"]


@pytest.mark.slow
def test_gitlab_ci_tags_main_and_fails_a_regressed_merge_request_exposing_its_report(pipelines):
    main, regressed = pipelines["gitlab"]
    assert (main["job"], main["ran"], main["report"]) == ("baseline", [("make setup", 0), ("run", 0), ("tag", 0)], None)
    # A regressed candidate's run exits 0 too: the gate's line decides, and fails the job.
    assert (regressed["job"], regressed["ran"]) == ("gate", [("make setup", 0), ("run", 0), ("gate", GATE_FAILED)])
    # Gated against the tagged baseline, the default branch's version (its cache, by the fallback key).
    assert f"`{regressed['version']}` vs baseline `{main['version']}`" in regressed["report"]
    # Exposed although the job failed, every path written; the state saved whatever the gate said.
    assert regressed["exposed"] and "gate-report/report.md" in regressed["artifacts"]
    assert regressed["artifacts"] == regressed["wanted"]
    assert (regressed["saved"] / "out" / regressed["version"] / "results.parquet").is_file()
    assert regressed["report"].startswith("## Regression gate FAILED")
    assert "**faithfulness regressed: " in regressed["report"]
