"""Resources: where dataset versions and reports live, which judge scores, and where."""

import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal, overload
from urllib.parse import quote

import dagster as dg
from pydantic import Field, PrivateAttr, create_model

from rag_eval.assets.outputs import output_folder
from rag_eval.assets.results_store import ResultsStore
from rag_eval.assets.stored_results import ResultWriter, TableFile

from rag_eval.metrics.core.base import Metric
from rag_eval.metrics.core.bounded import clip, read_bounded
from rag_eval.metrics.core.extras import MissingExtra, require
from rag_eval.metrics.core.scoring import Task, results_frame, score_chunks
from rag_eval.metrics.errors import SettingsError, command
from rag_eval.metrics.judges import Judge, OfflineJudge
from rag_eval.metrics.judges.built import BuiltJudges
from rag_eval.metrics.judges.cache import JudgementCache
from rag_eval.metrics.judges.offline import Rules
from rag_eval.metrics.judges.spill import SpillSink, spill_folders
from rag_eval.metrics.judges.examples import Examples, read_variant
from rag_eval.metrics.judges.llm import LLMConfig, LLMJudge
from rag_eval.metrics.judges.verifier import Verifier


#: A version's own settings, beside its samples (:meth:`DatasetStore.settings`).
SETTINGS_FILE = "settings.json"
#: Bytes a version's ``settings.json`` may hold (64 KiB: rag-eval writes a few dozen).
MAX_SETTINGS_BYTES = 64 * 1024


class DatasetStore(dg.ConfigurableResource):
    """Dataset versions on disk, one folder per version::

        <root>/<version>/samples.jsonl   one JSON object a line (required)
        <root>/<version>/meta.json       {"retriever": ..., "generator": ..., ...} (optional)
        <root>/<version>/settings.json   {"max_rejected_share": 0.3} (optional: ``rag-eval register`` or
                                         ``run --max-rejected-share``; every launch of the version reads it)

    Version keys sort by time when they start with a UTC timestamp, as the keys
    ``rag-eval register`` makes do (``20261130T020000Z-fiqa``).
    """

    root: str = "datasets"

    def samples_path(self, version: str) -> Path:
        """The samples file of ``version``."""
        return Path(self.root) / version / "samples.jsonl"

    def meta(self, version: str) -> dict:
        """The version's ``meta.json`` (which retriever and generator produced it), or ``{}``."""
        path = Path(self.root) / version / "meta.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}

    def settings(self, version: str) -> dict:
        """The version's own settings (``settings.json``, kept with it at registration), or ``{}`` without one.

        Raises
        ------
        SettingsError
            Naming the file, what is wrong and how to fix it: a symbolic link or not a regular file, more
            than :data:`MAX_SETTINGS_BYTES`, not UTF-8 JSON, not a JSON object, or a ``max_rejected_share``
            that is not a number from 0 to 1 (``null`` is no share).
        """
        path = Path(self.root) / version / SETTINGS_FILE
        if not os.path.lexists(path):
            return {}
        fix = f"delete it, then give the share again: {command(f'register {path.parent} --max-rejected-share SHARE')}"
        try:
            values = json.loads(read_bounded(path, MAX_SETTINGS_BYTES, links=False, fix=fix))
        except SettingsError:
            raise
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, an integer too long
            raise SettingsError(f"{path}: not valid JSON ({clip(str(exc) or 'nested too deeply', 100)}); {fix}") from None
        if not isinstance(values, dict):
            raise SettingsError(f"{path}: must hold a JSON object such as {{\"max_rejected_share\": 0.3}}, "
                                f"got {type(values).__name__}; {fix}")
        share = values.get("max_rejected_share")
        if share is not None and (isinstance(share, bool) or not isinstance(share, int | float)
                                  or not math.isfinite(share) or not 0 <= share <= 1):
            raise SettingsError(f"{path}: max_rejected_share must be a number from 0 to 1, got "
                                f"{clip(json.dumps(share), 40)}; {fix}")
        return values

    def versions(self) -> list[str]:
        """Folder names holding a ``samples.jsonl``, sorted (hidden folders, such as a
        registration being staged, excluded)."""
        root = Path(self.root)
        return sorted(p.parent.name for p in root.glob("*/samples.jsonl")
                      if not p.parent.name.startswith(".")) if root.exists() else []


#: Where ``make dev`` serves the Data Docs site: the checks link their pages there, whichever way their run was
#: launched (``rag-eval run`` too), so that the links open from the UI; ``$RAG_EVAL_DATA_DOCS_URL`` names another
#: server, or, set empty, keeps ``file://`` links.
DATA_DOCS_URL = "http://127.0.0.1:3001"


class ReportStore(dg.ConfigurableResource):
    """Where each version's report files (``summary.json``, ``results.parquet``...) are written:
    ``<root>/<version>/``; and great-expectations' Data Docs site of every version,
    ``<root>/data_docs/``, served at ``data_docs_url`` when it is set (:data:`DATA_DOCS_URL` by default,
    where ``make dev`` serves it)."""

    root: str = "out"
    data_docs_url: str = ""

    def data_docs(self) -> Path:
        """The folder of the Data Docs site (``index.html``)."""
        return Path(self.root) / "data_docs"

    def link(self, page: Path) -> str:
        """The URL of a page of the Data Docs site: under ``data_docs_url`` when set, else a
        ``file://`` URL (browsers do not open those from a web page such as the Dagster UI)."""
        if not self.data_docs_url:
            return page.resolve().as_uri()
        relative = page.resolve().relative_to(self.data_docs().resolve()).as_posix()
        return f"{self.data_docs_url.rstrip('/')}/{quote(relative)}"

    def folder(self, version: str) -> Path:
        """The report folder of ``version``, created if needed.

        Raises
        ------
        StorageError
            When ``<root>/<version>`` or an entry of it leads out of the output folder (a symbolic
            link planted there): nothing is written through it
            (``rag_eval.assets.outputs.output_folder``).
        """
        return output_folder(self.root, Path(self.root) / version)

    def data_docs_site(self) -> Path:
        """The folder of the Data Docs site, created if needed, none of whose entries at any depth
        leads out of the output folder (great-expectations writes into it).

        Raises
        ------
        StorageError
            Naming a symbolic link out of the output folder.
        """
        return output_folder(self.root, self.data_docs(), tree=True)


class ExecutionResource(dg.ConfigurableResource):
    """Where the metric assets score samples: in the run's process (``local``) or in Spark
    tasks (``spark``), with the same results. The Spark session is the deployment's active
    one if there is one, else one started for the run (``master``, ``spark_conf``) and
    stopped after it. ``parallelism`` is the number of tasks per metric; each gets that
    share of the LLM judge's concurrency limit.
    """

    executor: str = "local"
    master: str = "local[2]"
    parallelism: int = 2
    spark_conf: dict[str, str] = {}
    #: Told ``(metric, done, total)`` after each scored sample, in the process that scores (``rag-eval run``
    #: draws its progress bars with it); not configuration: the copy Dagster makes of the resource for a run keeps it.
    progress: dg.ResourceDependency[Callable[[str, int, int], None] | None] = None  # type: ignore[assignment]  # Dagster types it as its descriptor, not the value held
    _spark: Any = PrivateAttr(default=None)
    _started: bool = PrivateAttr(default=False)

    def score(self, tasks: list[Task], version: str) -> list[TableFile]:
        """Per-row results (``rag_eval.metrics.evaluate.results_frame``, with ``version`` first) of
        each ``(metric, samples, judge)`` task, every metric of the call judged together,
        wherever it runs, each written to its file chunk by chunk as it is judged;
        ``progress(metric, done, total)`` after each scored sample when this resource has a ``progress``.

        Raises
        ------
        dagster.Failure
            For an executor other than ``local`` or ``spark``.
        """
        if self.executor not in ("local", "spark"):
            raise dg.Failure(f"executor must be 'local' or 'spark', got {self.executor!r}")
        done = {metric.name: 0 for metric, _, _ in tasks}
        total = {metric.name: len(samples) for metric, samples, _ in tasks}

        def step(metric: Metric) -> None:
            done[metric.name] += 1
            if self.progress:
                self.progress(metric.name, done[metric.name], total[metric.name])

        writers = [ResultWriter(version) for _ in tasks]
        try:
            if self.executor == "local":
                for part in score_chunks(tasks, step):  # each chunk written out: the results do not pile up
                    for writer, results in zip(writers, part):
                        writer.write(results_frame(results))
            else:
                from rag_eval.metrics.core.spark import score_on_spark

                for writer, (metric, samples, judge) in zip(writers, tasks):
                    results = score_on_spark(self._session(), samples, [metric], judge, self.parallelism)
                    for _ in results:
                        step(metric)
                    writer.write(results_frame(results))
            return [writer.close() for writer in writers]
        except BaseException:
            for writer in writers:
                writer.discard()
            raise
        finally:
            for judge in {id(judge): judge for _, _, judge in tasks}.values():
                judge.forget()  # the summary's step comes next in this process

    def _session(self):
        if self._spark is None:
            try:
                require("pyspark", "spark", "Spark execution")
            except MissingExtra as exc:
                raise dg.Failure(str(exc), allow_retries=False) from None
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers run this interpreter
            from pyspark import SparkContext
            from pyspark.sql import SparkSession

            self._spark = SparkSession.getActiveSession()
            if self._spark is None and SparkContext._active_spark_context is not None:
                self._spark = SparkSession.builder.getOrCreate()  # the deployment's session, not ours to stop
            if self._spark is None:
                builder = SparkSession.builder.master(self.master).appName("rag-eval")
                for key, value in {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                                   **self.spark_conf}.items():
                    builder = builder.config(key, value)
                self._spark, self._started = builder.getOrCreate(), True
                self._spark.sparkContext.setLogLevel("ERROR")
        return self._spark

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        """Stop the Spark session this resource started (never the deployment's)."""
        if self._started:
            self._spark.stop()


#: Every public setting of ``LLMConfig`` (the one model of the judge's settings), optional:
#: unset, it takes the environment's value, then ``LLMConfig``'s default.
#: (Any: mypy matches a ** dict against every parameter of create_model, not the fields it holds.)
_JUDGE_FIELDS: dict[str, Any] = {name: (LLMConfig.types()[name] | None, None) for name in LLMConfig.public_fields()}
JudgeSettings = create_model("JudgeSettings", **_JUDGE_FIELDS)


class JudgeResource(dg.ConfigurableResource, JudgeSettings):
    """The judge behind every metric asset, a plain judge object from ``rag_eval.metrics.judges``.

    With an OpenAI-compatible endpoint configured (``OPENAI_API_KEY`` and/or
    ``OPENAI_BASE_URL`` in the environment, or ``base_url`` here) this is the LLM judge;
    otherwise the offline heuristic judge (no key, no network). API keys are read from
    the environment only (``OPENAI_API_KEY``, ``EMBEDDING_API_KEY``) by the process that
    runs the step: there is no key field, so run configuration, logs and metadata never
    hold one, and a ``base_url`` with credentials is refused (``ValueError``). Its fields
    are ``LLMConfig``'s public ones (:data:`JudgeSettings`): unset, they take the
    environment's value, then ``LLMConfig``'s default; ``max_row_requests`` and
    ``max_row_tokens`` are the per-row budget of each metric (0: no limit).
    ``support_threshold`` is the offline judge's (``rag_eval.metrics.judges.offline.Rules``);
    ``verifier`` the path of a judge variant ``rag-eval align`` writes, whose name and version enter
    the code version: the offline judge's verifier weights (the shipped ``verifier.json`` when unset),
    or, with the LLM judge, its labelled examples (``rag_eval.metrics.judges.examples``; none when
    unset); the file's content says which, and a file of the other judge's kind is a ``SettingsError``.
    ``offline``: the offline judge whatever the environment and ``base_url`` say (a judge cascade's
    cheap judge, ``rag_eval.assets.cascade``).
    """

    support_threshold: float | None = None
    verifier: str | None = None
    offline: bool = False
    #: The judges :meth:`get_judge` built (not configuration): the copy Dagster makes of the resource for
    #: each run (run configuration applied) shares its origin's, so a command's checks before its runs and
    #: the steps of every run share one judge per configuration.
    built_judges: dg.ResourceDependency[BuiltJudges] = Field(default_factory=BuiltJudges)  # type: ignore[arg-type]  # Dagster types it as its descriptor, not the value held

    @overload
    def _variant(self, llm: Literal[True]) -> Examples | None: ...
    @overload
    def _variant(self, llm: Literal[False]) -> Verifier | None: ...

    def _variant(self, llm: bool) -> Verifier | Examples | None:
        """The variant file's judge variant (``None`` unset), refused when it is not ``llm``'s kind."""
        variant = read_variant(self.verifier) if self.verifier else None
        if variant is not None and isinstance(variant, Examples) != llm:
            raise SettingsError(
                f"{self.verifier} holds the LLM judge's examples, and the judge is the offline one (no OPENAI_BASE_URL "
                "or OPENAI_API_KEY): set them to use it, or pass verifier weights" if llm is False else
                f"{self.verifier} holds the offline verifier's weights, and the judge is an LLM: pass the examples "
                f"`{command('align')}` writes with the LLM judge, or unset OPENAI_BASE_URL and OPENAI_API_KEY")
        return variant

    def _verifier(self) -> Verifier:
        return self._variant(llm=False) or Verifier()

    def _config(self) -> LLMConfig:
        if self.offline:  # nothing of the environment's LLM settings applies
            return LLMConfig()
        return LLMConfig.from_env(**{name: getattr(self, name) for name in LLMConfig.public_fields()})

    def code_version(self) -> str:
        """Which judge decides, as the metric assets' code version records it:
        ``llm:<model>`` or ``offline:<rule and verifier versions>``, without building the judge."""
        config = self._config()
        if not config.configured:
            return f"offline:{OfflineJudge.label_of(self._verifier())}"
        examples = self._variant(llm=True)
        return f"llm:{config.model}" + (f"+{examples.label}" if examples else "")

    def get_judge(self, read_only_cache: bool = False) -> Judge:
        """One judge per resource (its ``built_judges``, shared by its copies) and configuration, so its model
        or connections, its concurrency limit, its endpoint check and its caches are shared by every
        metric asset of a run and by the command that runs it. With ``read_only_cache`` (a dry run's), an
        LLM judge of its own, not kept, that only reads its cache (``LLMJudge``): the caller closes it.

        Raises
        ------
        ValueError
            For settings the judge refuses (``LLMConfig``: e.g. a ``base_url`` with credentials).
        SettingsError
            For a ``verifier`` file of the other judge's kind.
        """
        config = self._config()
        examples = self._variant(llm=True) if config.configured else None
        if read_only_cache and config.configured:  # a dry run's: its own, not kept
            return LLMJudge(config, examples, read_only_cache=True)
        if config.configured:
            key = repr([*sorted(asdict(config).items()), examples and examples.label])
            return self.built_judges.get(key, lambda: LLMJudge(config, examples, sink=self.built_judges.sink))
        rules = None if self.support_threshold is None else Rules(support_threshold=self.support_threshold)
        return self.built_judges.get(f"offline:{self.support_threshold}:{OfflineJudge.label_of(self._verifier())}",
                               lambda: OfflineJudge(rules, verifier=self._verifier().path))

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        """Say in the run's log (the UI's; ``rag-eval`` says it on stderr itself) which spill files hold the
        answers its judges' caches refused during the run, once each (``BuiltJudges.untold_spills``)."""
        spills = self.built_judges.untold_spills()
        if spills and context.log is not None:
            context.log.warning(
                f"the judgement cache could not take every judgement paid for (its disk is full or read-only): they are "
                f"in the spill file(s) {', '.join(map(str, spills))}; the next `{command('run')}` with that cache folds "
                f"them in, or `{command('cache import FILE')}` does now")

    def call_cache(self, path: str | Path) -> JudgementCache:
        """The cache of a target's paid calls at ``path`` (``rag_eval.assets.targets``): the answers its
        file refuses go where this resource's judges send theirs (its ``built_judges``' ``sink``)."""
        return JudgementCache(path, sink=self.built_judges.sink)


def build_resources(out: str | Path = "out", datasets: str | Path = "datasets", judge: JudgeResource | None = None,
                    execution: ExecutionResource | None = None,
                    strong_judge: JudgeResource | None = None) -> dict[str, Any]:
    """The resources of the evaluation graph, the one place they are wired (the code
    location's ``Definitions``, ``rag-eval`` and the tests): dataset versions under
    ``datasets``, reports, the asset tables (``tables/<asset>/<version>.parquet``) and the
    views of ``rag_eval.duckdb`` and the Data Docs site under ``out`` (served at
    ``$RAG_EVAL_DATA_DOCS_URL``, else :data:`DATA_DOCS_URL`), the ``judge`` and where metrics are scored (``execution``; ``local`` by
    default, ``spark`` scores each metric's samples in Spark tasks) and the ``strong_judge`` of a judge
    cascade (``rag_eval.assets.cascade``; by default the environment's judge, as ``judge``'s). The default
    judges spill what their caches refuse (a full or read-only disk mid-run) to spill files in ``out``, else
    the temporary folder (``rag_eval.metrics.judges.spill.SpillSink``), as each answer arrives: a run the daemon
    launches keeps what it paid for as ``rag-eval run`` does (whose own judges spill to its command's files),
    names the files in its log (``JudgeResource.teardown_after_execution``), and the next ``rag-eval run``
    with that cache folds them in. The two default judges share what they build (one judge per configuration)."""
    built = BuiltJudges(SpillSink(spill_folders(out)))  # one for both: a spill file is said once
    return {"dataset_store": DatasetStore(root=str(datasets)),
            "report_store": ReportStore(root=str(out), data_docs_url=os.environ.get("RAG_EVAL_DATA_DOCS_URL", DATA_DOCS_URL)),
            "judge": judge or JudgeResource(built_judges=built), "strong_judge": strong_judge or JudgeResource(built_judges=built),
            "execution": execution or ExecutionResource(),
            "io_manager": ResultsStore(root=str(out))}
