"""Fixtures and the one scripted judge shared by the tests.

``ScriptedJudge`` answers every judgement with fixed verdicts (no model, no network);
``server`` is the project's OpenAI-compatible test server on 127.0.0.1 and
``make_judge`` an LLM judge on it.
"""
import json
import math
import os
import re
import sqlite3
import sys
import zlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from rag_eval.metrics.judges.base import Judge, JudgeError, Verdict
from rag_eval.metrics.judges.llm import LLMConfig, LLMJudge
from rag_eval.metrics.judges.prompts import example_answer
from rag_eval.orchestration.judge_sim import JudgeServer

TEST_KEY = "sk-test-SECRET-not-a-real-key"
DATA = Path(__file__).parent / "data"
#: The FiQA example (30 rows).
FIQA = Path(__file__).resolve().parent.parent / "examples" / "fiqa" / "samples.jsonl"


def regression_case(case_id: str) -> dict:
    """The case ``case_id`` (``BR-NN``) of ``tests/data/regression_cases.jsonl``."""
    with (DATA / "regression_cases.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            case = json.loads(line)
            if case["id"] == case_id:
                return case
    raise KeyError(case_id)


def zlib_streams(data: bytes):
    """Every zlib stream that decompresses from some offset of ``data``."""
    for match in re.finditer(rb"\x78[\x01\x5e\x9c\xda]", data):
        try:
            yield zlib.decompressobj().decompress(data[match.start():])
        except zlib.error:
            continue


def readable(path: Path) -> list[bytes]:
    """The file's bytes, the zlib streams inside them, and for SQLite, Parquet and DuckDB
    files every value they hold (decompressed where it is a zlib blob)."""
    data = path.read_bytes()
    texts = [data, *zlib_streams(data)]
    if data.startswith(b"SQLite format 3"):
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            for (table,) in db.execute("select name from sqlite_master where type = 'table'").fetchall():
                for row in db.execute(f'select * from "{table}"'):
                    for value in row:
                        if isinstance(value, bytes):
                            texts += [value, *zlib_streams(value)]
                        else:
                            texts.append(str(value).encode())
    elif path.suffix == ".parquet":
        import pandas as pd

        texts.append(pd.read_parquet(path).to_json().encode())
    elif path.suffix == ".duckdb":
        import duckdb

        with duckdb.connect(str(path), config={"custom_user_agent": "dagster", "arrow_large_buffer_size": True}) as db:
            for schema, table in db.sql("select table_schema, table_name from information_schema.tables").fetchall():
                texts.append(db.sql(f'select * from "{schema}"."{table}"').df().to_json().encode())
    return texts





class ScriptedJudge(Judge):
    """Fixed verdicts for every judgement; never reads the text (except through a callable).

    ``support`` (statement support, reference attribution) and ``usefulness`` are lists of
    0/1, one per item, or a callable ``(item) -> int``; by default every item gets 1.
    ``similarities``/``noncommittal`` are answer_questions' verdict; ``ratings`` the
    per-context (a, b) ratings (default (2, 2) each); ``matrix`` (the rows, or ``{statement: row}``),
    ``classify`` ((supported,
    covered); default all 1), ``entities``, ``whole`` and ``likert`` ((score, reason)) the
    verdicts of those judgements; ``similarity`` the cosine of any two embedded texts. Any
    other judgement is answered through its LLM side with every verdict 1
    (``rag_eval.metrics.judges.prompts.example_answer``), so a new judgement needs no script here.
    ``raise_error`` makes every request fail with a JudgeError. ``calls`` lists the kinds
    asked (and ``embeddings``). Statement segmentation is the deterministic one.
    """

    name = "scripted"

    def __init__(self, support=None, similarities=(1.0,), noncommittal=(False,), ratings=None, usefulness=None,
                 matrix=None, classify=None, entities=None, whole=(2, 2), similarity=1.0, likert=(5, "scripted"),
                 raise_error: bool = False) -> None:
        self.script = dict(support=support, similarities=list(similarities), noncommittal=list(noncommittal),
                           ratings=ratings, usefulness=usefulness, matrix=matrix, classify=classify,
                           entities=entities, whole=whole, similarity=similarity, likert=likert)
        self.raise_error = raise_error
        self.calls: list[str] = []

    def _called(self, kind: str) -> None:
        self.calls.append(kind)
        if self.raise_error:
            raise JudgeError("scripted failure: model returned garbage three times")

    @staticmethod
    def _verdicts(script, items) -> list[Verdict]:
        values = [script(item) for item in items] if callable(script) else \
            [1] * len(items) if script is None else script
        return [Verdict(v, "scripted") for v in values]

    async def ask(self, judgement, inputs):
        self._called(judgement.kind)
        s, kind = self.script, judgement.kind
        if kind in ("statement_support", "reference_attribution"):
            return judgement.verdict(verdicts=self._verdicts(s["support"], inputs.statements))
        if kind == "context_usefulness":
            return judgement.verdict(verdicts=self._verdicts(s["usefulness"], inputs.contexts))
        if kind == "answer_questions":
            return judgement.verdict(similarities=s["similarities"], noncommittal=s["noncommittal"])
        if kind == "context_relevance":
            ratings = s["ratings"] if s["ratings"] is not None else [(2, 2)] * len(inputs.contexts)
            return judgement.verdict(ratings=[tuple(r) for r in ratings])
        if kind == "context_support_matrix":  # a dict: each statement's row, whichever statements are asked
            matrix = s["matrix"]
            return judgement.verdict(matrix=[matrix[t] for t in inputs.statements] if isinstance(matrix, dict)
                                     else matrix)
        if kind == "statement_classification":
            supported, covered = s["classify"] or ([1] * len(inputs.response_statements),
                                                   [1] * len(inputs.reference_statements))
            return judgement.verdict(supported=supported, covered=covered)
        if kind == "entities":
            return judgement.verdict(entities=s["entities"])
        if kind == "whole_context_relevance":
            return judgement.verdict(ratings=tuple(s["whole"]))
        if kind.startswith("likert_"):
            score, reason = s["likert"]
            return judgement.verdict(score=score, reason=reason)
        return await judgement.llm(self, inputs)  # any other judgement: its LLM side, answered below

    #: What a judgement's LLM side reads from its judge (``LLMJudge.config.strictness``).
    config = SimpleNamespace(strictness=1)

    async def ask_request(self, version, request, inputs):
        """The reply to a judgement without a script: every verdict 1, as the dry run's stand-in."""
        return request.validate(example_answer(request.schema))

    def batches(self, contexts):
        return [(0, contexts)]

    async def embeddings(self, texts):
        """The first text along x, every other at the scripted cosine from it."""
        self._called("embeddings")
        cosine = self.script["similarity"]
        other = [cosine, math.sqrt(max(0.0, 1 - cosine ** 2))]
        return np.array([[1.0, 0.0]] + [other] * (len(texts) - 1))


#: Fixtures that make a test slow: the test server, a Spark session, a PostgreSQL server.
SLOW_FIXTURES = {"server": (), "make_judge": (), "spark": ("spark",), "postgres": ()}


def pytest_ignore_collect(collection_path, config):
    """With ``-m "not slow"`` the pipeline tests (every one of them slow) are not even imported:
    the pure tests run without loading Dagster's definitions."""
    if config.getoption("markexpr", "").replace(" ", "") == "notslow" and "pipeline" in collection_path.parts:
        return True
    return None


#: The files that take longest, longest first (`make test`'s durations, 2026-12-07): with `--dist loadfile`
#: and `--no-loadscope-reorder` (the Makefile) the workers start with them, and the many short files fill
#: in after; started last, the deployment tests (about 9 minutes) kept one worker busy alone at the end.
LONGEST_FIRST = ("pipeline/test_deployment.py", "reliability/test_storage_faults.py", "reliability/test_crash.py",
                 "pipeline/test_pipeline.py", "pipeline/test_custom_and_plugin_metrics.py",
                 "reliability/test_concurrency.py", "pipeline/test_traffic_deployment.py",
                 "pipeline/test_gate_pipeline.py", "pipeline/test_targets.py", "pipeline/test_registration.py",
                 "pipeline/test_spark.py", "test_ci_recipe.py", "pipeline/test_cascade_cli.py",
                 "pipeline/test_align_cli.py")


def _rank(item) -> int:
    path = Path(str(item.fspath)).as_posix()
    return next((i for i, name in enumerate(LONGEST_FIRST) if path.endswith(f"tests/{name}")), len(LONGEST_FIRST))


def pytest_collection_modifyitems(items):
    """``slow`` (and ``spark``) for every test using the test server or Spark; the files of
    :data:`LONGEST_FIRST` first, the others in their order."""
    for item in items:
        for fixture, extra in SLOW_FIXTURES.items():
            if fixture in getattr(item, "fixturenames", ()):
                for mark in ("slow", *extra):
                    item.add_marker(mark)
    items[:] = sorted(items, key=_rank)


@pytest.fixture(scope="session")
def spark():
    """A local Spark session (two worker threads; a failed task is tried a second time)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2,2]").appName("rag-eval-tests")
               .config("spark.ui.enabled", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def postgres(tmp_path_factory):
    """A private PostgreSQL server on 127.0.0.1 for the session (``tests.postgres``): ``.url``
    (SQLAlchemy form, database ``postgres``, user ``postgres``, no password); skipped where
    PostgreSQL is not installed."""
    from tests.postgres import PostgresServer, available

    why = available()
    if why:
        pytest.skip(why)
    running = PostgresServer(tmp_path_factory.mktemp("postgres")).start()
    yield running
    running.stop()


@pytest.fixture
def server():
    """A fresh scripted OpenAI-compatible server on 127.0.0.1 for one test."""
    running = JudgeServer().start()
    yield running
    running.stop()


@pytest.fixture
def make_judge(server, tmp_path):
    """``make_judge(**options)``: an LLM judge on the test server (key ``TEST_KEY``, model
    ``judge-test``, a cache in ``tmp_path``, short waits), ``options`` overriding any
    ``LLMConfig`` field; closed after the test."""
    made: list[LLMJudge] = []

    def make(**options) -> LLMJudge:
        settings = dict(base_url=server.url, api_key=TEST_KEY, model="judge-test", embedding_model="embed-test",
                        cache_path=str(tmp_path / "cache.sqlite"), max_retry_wait=0.05, timeout=5)
        made.append(LLMJudge(LLMConfig(**{**settings, **options})))
        return made[-1]

    yield make
    for judge in made:
        judge.close()
