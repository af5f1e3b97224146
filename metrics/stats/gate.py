"""The regression gate's settings, its baseline, version tags and repeated judgements.

Settings live in one TOML file: ``[tool.rag_eval.gate]`` of the project's
``pyproject.toml`` by default, or any file given with ``--config`` (the same keys, at its
top level or under ``[tool.rag_eval.gate]``)::

    [tool.rag_eval.gate]
    metrics = ["faithfulness", "answer_relevancy"]   # gated metrics (default: the five core ones)
    margins = { faithfulness = 0.03 }                # per metric, on its scale (default 0.02 on [0, 1])
    baseline = "previous"        # "previous" (the latest earlier version with results),
                                 # "tag:production" (datasets/tags.json), or a version key
    max_coverage_drop = 0.05     # largest allowed rise of the share of rows not scored ok
    repeats = 1                  # judgements per row (LLM judge; the offline judge is deterministic)
    blocking = true              # the asset check blocks downstream assets (false: a warning)

Tags name versions (``production``, ``release-3``) in ``<datasets>/tags.json``, a JSON
object ``{"production": "<version key>"}`` written by ``rag-eval tag NAME VERSION``.
"""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import InitVar, dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd

from rag_eval.metrics.core.bounded import clip, quote
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.judges.llm import LLMJudge
from rag_eval.metrics.core.registry import CORE_METRICS, Registry, build_metrics, given
from rag_eval.metrics.core.samples import Sample
from rag_eval.metrics.core.settings import tool_section
from rag_eval.metrics.errors import InputError, NotFoundError, SettingsError, command

TAGS_FILE = "tags.json"


@dataclass
class GateConfig:
    """The gate's settings (see the module's notes for each key).

    Raises
    ------
    ValueError
        For no gated metric, an unknown metric, a margin or coverage limit that is not a
        finite number ≥ 0 (the limit at most 1), repeats not a whole number ≥ 1, ``blocking``
        not a boolean, or a baseline that is neither ``previous``, ``tag:NAME`` nor a plausible version key.
    """

    metrics: list[str] = field(default_factory=lambda: list(CORE_METRICS))
    margins: dict[str, float] = field(default_factory=dict)
    baseline: str = "previous"
    max_coverage_drop: float = 0.05
    repeats: int = 1
    blocking: bool = True
    #: The metrics the settings may name (default the built-in ones): not a setting of the file.
    registry: InitVar[Registry | None] = None
    #: ``registry``, as the comparison reads the metrics' directions and ranges from it.
    known: Registry = field(init=False, repr=False, compare=False)

    def __post_init__(self, registry: Registry | None) -> None:
        self.known = given(registry)
        if not isinstance(self.metrics, list) or not self.metrics or not all(isinstance(m, str) for m in self.metrics):
            raise SettingsError(f"gate config: metrics must be a list naming at least one metric to gate, "
                             f"got {quote(self.metrics)}")
        if not isinstance(self.margins, dict):
            raise SettingsError(f"gate config: margins is a table of metric = margin, got {quote(self.margins)}")
        if not isinstance(self.baseline, str):
            raise SettingsError(f"gate config: baseline is 'previous', 'tag:NAME' or a version key, got {quote(self.baseline)}")
        unknown = [m for m in [*self.metrics, *self.margins] if m not in self.known]
        if unknown:
            raise SettingsError(f"gate config: unknown metric(s) {quote(unknown)}")
        numbers = {f"margins.{m}": v for m, v in self.margins.items()} | {"max_coverage_drop": self.max_coverage_drop}
        for name, value in numbers.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise SettingsError(f"gate config: {clip(name, 80)} must be a finite number, 0 or more, got {quote(value)}")
        if self.max_coverage_drop > 1:
            raise SettingsError(f"gate config: max_coverage_drop is a share of rows (0 to 1), got {self.max_coverage_drop}")
        if isinstance(self.repeats, bool) or not isinstance(self.repeats, int) or self.repeats < 1:
            raise SettingsError(f"gate config: repeats must be a whole number, 1 or more, got {quote(self.repeats)}")
        if not isinstance(self.blocking, bool):
            raise SettingsError(f"gate config: blocking is true or false, got {quote(self.blocking)}")
        if not self.baseline or self.baseline == "tag:":
            raise SettingsError("gate config: baseline is 'previous', 'tag:NAME' or a version key")

    @classmethod
    def load(cls, path: str | Path | None = None, registry: Registry | None = None, **overrides: Any) -> GateConfig:
        """Settings from ``path`` (default ``pyproject.toml`` in the working folder, whose
        ``[tool.rag_eval.gate]`` may be absent: defaults), then ``overrides`` (``None`` ignored), naming
        metrics of ``registry`` (default the built-in ones).

        Raises
        ------
        FileNotFoundError
            If ``path`` is given and does not exist.
        ValueError
            For a file that is not TOML, an unknown key (named with the file), or a bad value.
        """
        values = tool_section(path, "gate", {f.name for f in fields(cls) if f.init})
        chosen = {k: v for k, v in overrides.items() if v is not None}
        values.update(chosen)
        try:
            return cls(**values, registry=registry)
        except ValueError as exc:  # which file the value came from (or the command's options)
            raise SettingsError(f"{exc} (settings: {path or 'pyproject.toml'}"
                                f"{' and the command line' if chosen else ''})") from None


def read_tags(datasets: str | Path) -> dict[str, str]:
    """``{tag: version}`` from ``<datasets>/tags.json`` (``{}`` without the file).

    Raises
    ------
    ValueError
        If the file is not a JSON object of strings.
    """
    path = Path(datasets) / TAGS_FILE
    if not path.exists():
        return {}
    try:
        tags = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{path}: not JSON: {exc}") from None
    if not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
        raise SettingsError(f"{path}: expected a JSON object {{tag: version key}}")
    return tags


def set_tag(datasets: str | Path, name: str, version: str) -> None:
    """Point tag ``name`` at ``version`` in ``<datasets>/tags.json`` (written atomically)."""
    if not re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}", name):  # what it says: no escape, no '..'
        raise SettingsError(f"tag {quote(name)}: use letters, digits, '.', '_' or '-' (not first: '.')")
    path = Path(datasets) / TAGS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tags = {**read_tags(datasets), name: version}
    staged = path.with_suffix(f".{os.getpid()}.tmp")
    staged.write_text(json.dumps(tags, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(staged, path)


def evaluated_versions(out: str | Path) -> list[str]:
    """Version keys with a ``results.parquet`` under ``out``, sorted (keys sort by time)."""
    root = Path(out)
    return sorted(p.parent.name for p in root.glob("*/results.parquet")) if root.exists() else []


#: Keys made by registration (``rag_eval.assets.registration``) start with the UTC time: ``20261130T020000Z-…``.
_TIMED = re.compile(r"^\d{8}T\d{6}Z-")


def is_timed(version: str) -> bool:
    """Whether ``version`` is a key that starts with its registration time (``<UTC time>-<name>-<hash>``);
    target runs (``<question set>.<configuration>``) and keys chosen by hand do not."""
    return bool(_TIMED.match(version))


def no_baseline(candidate: str) -> str:
    """Why ``previous`` gives ``candidate`` no baseline (:func:`resolve_baseline` gave ``None``) and, for a key
    without a registration time (named by hand with ``--dataset-version``, or a sweep's target run), what to pass."""
    if is_timed(candidate):
        return f"no version before {candidate} has results"
    return (f"{candidate} is a version key without a registration time (named by hand, or a target run), and "
            "`previous` follows the registration times of generated keys: name its baseline with "
            f"`{command(f'gate {candidate} --baseline VERSION')}` (or tag:NAME), or set `baseline` in the gate settings")


def resolve_baseline(candidate: str, baseline: str, versions: list[str], tags: dict[str, str]) -> str | None:
    """The baseline of ``candidate``: for ``previous`` the latest time-keyed version of
    ``versions`` registered before it (``None`` when there is none, or when ``candidate``'s key
    carries no time, e.g. a target run of a sweep: name its baseline), for ``tag:NAME`` the
    tagged version, otherwise ``baseline`` itself.

    Raises
    ------
    ValueError
        For a tag that is not set, or a baseline that has no results (not in ``versions``).
    """
    if baseline == "previous":
        earlier = [v for v in versions if is_timed(v) and v < candidate] if is_timed(candidate) else []
        return earlier[-1] if earlier else None
    if baseline.startswith("tag:"):
        name = baseline[4:]
        if name not in tags:
            raise SettingsError(f"baseline tag {quote(name)} is not set: `{command(f'tag {name} VERSION')}` sets it "
                             f"(tags: {sorted(tags) or 'none'})")
        baseline = tags[name]
    if baseline not in versions:
        raise InputError(f"baseline version {baseline} has no results (out/{baseline}/results.parquet); evaluate it "
                         f"first with `{command('run')}`")
    return baseline


def effective_repeats(judge: Judge, repeats: int) -> tuple[int, str | None]:
    """``(K, note)``: ``repeats`` for the LLM judge; 1 for a deterministic judge, with the note saying so."""
    if repeats > 1 and not isinstance(judge, LLMJudge):
        return 1, (f"{judge.name} is deterministic: each row is judged once (repeats = 1, not {repeats}); "
                   "the interval holds row sampling only")
    if not isinstance(judge, LLMJudge):
        return 1, f"{judge.name} is deterministic: repeats = 1, no judge variance to measure"
    return repeats, None


def with_repeats(results: pd.DataFrame, samples: list[Sample], judge: Judge, repeats: int,
                 metrics: list[str], registry: Registry | None = None) -> pd.DataFrame:
    """``results`` (repeat 0) plus repeats ``1 .. repeats-1`` of ``metrics`` judged again by
    ``judge`` with the repeat index (LLM judge: seed ``seed + r`` and the repeat in the cache
    key, so a second call costs nothing). A ``repeat`` column tells them apart.

    Parameters
    ----------
    results : DataFrame
        The version's per-row results (``results.parquet``).
    samples : list of Sample
        The version's samples, as loaded from its ``samples.jsonl``.
    registry : Registry, optional
        Where ``metrics`` are (default the built-in ones).
    """
    from rag_eval.metrics.core.scoring import results_frame, score_all

    frames = [results[results["metric"].isin(metrics)].assign(repeat=0)]
    for repeat in range(1, repeats):
        again = judge.with_options(repeat=repeat)  # type: ignore[attr-defined]  # repeats: the LLM judge's
        frames.append(results_frame(score_all(samples, build_metrics(metrics, registry=registry), again)).assign(repeat=repeat))
    return pd.concat(frames, ignore_index=True)


@dataclass
class Version:
    """One side of a comparison: its name (version key or file), per-row results and, when
    known, its samples file (needed to judge repeats) and the folder of its human labels
    (``labels.jsonl``, ``rag_eval.metrics.sources.labels``)."""

    name: str
    results: pd.DataFrame
    samples_path: Path | None = None
    labels_folder: Path | None = None

    def estimates(self, registry: Registry | None = None) -> tuple[dict[str, Any], list[str]]:
        """``({metric: MeanEstimate}, notes)``: the prediction-powered estimate of each metric (of
        ``registry``, default the built-in ones) with enough labels (``rag_eval.metrics.stats.estimates``), and a note per labelled metric without one or per
        label line refused."""
        from rag_eval.metrics.stats.estimates import metric_estimate
        from rag_eval.metrics.sources.labels import labels_frame

        if self.labels_folder is None or "row" not in self.results:
            return {}, []
        first = self.results[self.results["repeat"] == 0] if "repeat" in self.results else self.results
        ids = zip(first["row"].astype(int), first["sample_id"].astype(str))
        labels, problems = labels_frame(self.labels_folder, ids, registry=registry)
        notes = [f"{self.name}: label refused: {p}" for p in problems[:5]]
        estimates = {}
        for metric in dict.fromkeys(labels["metric"]):
            if metric in set(first["metric"]):
                labelled = metric_estimate(first, labels, metric, registry=registry)
                if labelled.estimate is None:
                    notes.append(f"{self.name}: {metric} judged on the judge's scores: {labelled.note}")
                else:
                    estimates[metric] = labelled.estimate
        return estimates, notes


def load_version(spec: str, out: str | Path, datasets: str | Path, judge: Judge, metrics: list[str],
                 registry: Registry | None = None) -> Version:
    """A comparison side from ``spec``: a version key (``<out>/<key>/results.parquet``, its labels
    in ``<datasets>/<key>/``), a results file (``.parquet``), a folder holding ``results.parquet``,
    or a dataset (``.jsonl``, or a folder holding ``samples.jsonl``) evaluated now with ``judge``
    on ``metrics`` of ``registry`` (default the built-in ones; a folder's ``labels.jsonl`` is its labels).

    Raises
    ------
    NotFoundError
        When ``spec`` is none of these.
    ValueError
        For a ``.parquet`` file without the columns of a results file (a dataset in Parquet).
    """
    from rag_eval.metrics.evaluate import evaluate

    path = Path(spec)
    name = spec.rstrip("/")
    stored = Path(out) / spec / "results.parquet"
    if not path.exists() and stored.exists():
        samples = Path(datasets) / spec / "samples.jsonl"
        return Version(spec, pd.read_parquet(stored), samples if samples.exists() else None, Path(datasets) / spec)
    if path.is_dir() and (path / "results.parquet").exists():
        samples = path / "samples.jsonl"
        return Version(name, pd.read_parquet(path / "results.parquet"), samples if samples.exists() else None, path)
    if path.suffix == ".parquet" and path.is_file():
        results = pd.read_parquet(path)
        missing = sorted({"metric", "status", "value", "row"} - set(results.columns))
        if missing:
            raise InputError(f"{spec}: not a results file (no column {', '.join(map(repr, missing))}): give "
                             "out/<version>/results.parquet, a version key, or a dataset (.jsonl)")
        return Version(name, results)
    samples = path / "samples.jsonl" if path.is_dir() else path
    if samples.is_file():
        return Version(name, evaluate(samples, metrics=metrics, judge=judge, registry=registry).results, samples,
                       path if path.is_dir() else None)
    raise NotFoundError(f"{spec}: not a version with results under {out}/, a results .parquet file, or a dataset "
                        "(.jsonl, or a folder holding samples.jsonl or results.parquet)")


def judged_apart(baseline: pd.DataFrame, candidate: pd.DataFrame) -> list[str]:
    """A note when the two sides' results were judged by different judges (their ``judge`` columns: another
    model, or a judge variant ``rag-eval align`` wrote): a difference may then be the judge's, not the system's."""
    judges = [sorted({str(j) for j in side["judge"].dropna() if j}) if "judge" in side else [] for side in
              (baseline, candidate)]
    if not all(judges) or judges[0] == judges[1]:
        return []
    return [f"WARNING: the versions were judged by different judges (baseline: {', '.join(judges[0])}; candidate: "
            f"{', '.join(judges[1])}): a difference may be the judge's, not the system's; judge both alike to compare "
            "them"]


def run_comparison(baseline: Version, candidate: Version, config: GateConfig, judge: Judge,
                   seed: int = 0) -> tuple[Any, list[str]]:
    """Compare ``candidate`` with ``baseline`` on the gated metrics (and every other metric both
    hold, ungated), with ``config.repeats`` judgements per row where the judge and the
    samples allow it. A metric both versions estimate, by human labels or else by judge cascades in their
    results (``rag_eval.metrics.stats.cascade_estimates.decided_on``), is decided on the two estimates.
    Returns ``(Comparison, notes)``; the notes say how the judge's variance entered (or why it did not),
    which metrics estimates decided, and why a version's cascade was not used. The metrics are those of
    ``config``'s registry (``GateConfig.known``)."""
    from rag_eval.metrics.stats.cascade_estimates import decided_on
    from rag_eval.metrics.stats.compare import compare
    from rag_eval.metrics.core.samples import load_samples
    from rag_eval.metrics.reports.conversations import has_conversations, per_conversation_results

    repeats, note = effective_repeats(judge, config.repeats)
    notes = [note] if note else []
    sides = []
    for side in (baseline, candidate):
        results = side.results
        if repeats > 1 and side.samples_path is None:
            notes.append(f"{side.name}: no samples file to judge repeats on; its rows count once")
        elif repeats > 1:
            results = with_repeats(results, load_samples(side.samples_path), judge, repeats, config.metrics,
                                   config.known)
        sides.append(results)
    judged = sides  # per judged row, as the cascades estimated them
    if any(has_conversations(side) for side in sides):
        sides = [per_conversation_results(side) for side in sides]
        notes.append("conversations compared as units: each one's mean over its turns, its worst turn's reason "
                     "(the turns of one conversation are not independent: resampling turns would narrow the interval)")
    if repeats > 1:
        notes.append(f"judged {repeats} times per row ({judge.name}, seed + repeat per repeat); the interval "
                     "resamples rows of per-row means, so it holds row sampling and judge noise")
    shared = set(sides[0]["metric"]) & set(sides[1]["metric"])
    others = [m for m in dict.fromkeys(sides[1]["metric"]) if m in shared and m not in config.metrics]
    (base_estimates, base_notes), (cand_estimates, cand_notes) = (side.estimates(config.known)
                                                                  for side in (baseline, candidate))
    names = (baseline.name, candidate.name)
    cascades, cascade_notes = decided_on(names, (judged[0], judged[1]), (base_estimates, cand_estimates), config.known)
    notes += base_notes + cand_notes + cascade_notes + judged_apart(baseline.results, candidate.results)
    comparison = compare(sides[0], sides[1], metrics=[*config.metrics, *others], margins=config.margins,
                         gated=config.metrics, max_coverage_drop=config.max_coverage_drop, seed=seed, names=names,
                         estimates=(base_estimates | cascades[0], cand_estimates | cascades[1]), registry=config.known)
    for kind, what in (("ppi", "human labels (prediction-powered estimates"),
                       ("cascade", "judge cascades (estimates of the strong judge's mean")):
        decided = [f"{m.metric} {m.basis}" for m in comparison.metrics.values() if m.basis.startswith(kind)]
        if decided:
            notes.append(f"decided on the versions' {what}, difference of two independent intervals): "
                         f"{', '.join(decided)}; the other metrics on the judge's paired rows")
    comparison.settings.update({"repeats": repeats, "judge": judge.name, "baseline_rule": config.baseline})
    return comparison, notes


def write_reports(comparison: Any, notes: list[str], folder: str | Path, history: list[Version]) -> dict[str, Path]:
    """Write ``comparison.json``, ``report.md`` and ``report.html`` into ``folder``; their paths.
    ``history``: the versions drawn on the trend charts, in order (baseline and candidate among them)."""
    from rag_eval.metrics.reports.gate_report import html_report, markdown_report, version_stats

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    metrics = list(comparison.metrics)
    paths = {"json": folder / "comparison.json", "md": folder / "report.md", "html": folder / "report.html"}
    paths["json"].write_text(json.dumps({**comparison.to_dict(), "notes": notes}, indent=2, ensure_ascii=False),
                             encoding="utf-8")
    paths["md"].write_text(markdown_report(comparison, notes), encoding="utf-8")
    stats = [version_stats(v.name, v.results, metrics) for v in history]
    paths["html"].write_text(html_report(comparison, stats, notes), encoding="utf-8")
    return paths


def history(out: str | Path, baseline: Version, candidate: Version, last: int = 12) -> list[Version]:
    """The versions on the trend charts: the evaluated versions under ``out`` up to the
    candidate (the ``last`` ones, the baseline always among them), or just the two sides when
    the candidate is not an evaluated version (files)."""
    versions = evaluated_versions(out)
    if candidate.name not in versions:
        return [baseline, candidate]
    chosen = [v for v in versions if v <= candidate.name][-last:]
    if baseline.name in versions and baseline.name not in chosen:
        chosen = [baseline.name, *chosen]
    known = {baseline.name: baseline, candidate.name: candidate}
    return [known.get(v) or Version(v, pd.read_parquet(Path(out) / v / "results.parquet")) for v in chosen]
