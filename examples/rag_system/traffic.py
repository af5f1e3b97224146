"""Simulated production traffic of the example RAG system, traced with OpenTelemetry and OpenInference.

Users ask the questions of questions.jsonl (drawn at random, at random times of each day), in
conversations: of each ten requests, five are single questions and five are the turns of two chat
sessions, one of two turns and one of three, a follow-up 20 s to 2 min after the answer before it
(the session's ``session.id`` on each turn's CHAIN span; a single question has none). Each request is answered by the BM25 retriever and the extractive generator of
rag_example.py and traced with the OpenTelemetry SDK using the OpenInference semantic
conventions, as Phoenix's instrumentations would: a CHAIN span (the request: ``input.value``,
``output.value``, ``session.id``, ``user.id``, ``metadata`` with the route) over a RETRIEVER
span (``retrieval.documents.{i}.document.id/content/score``) and an LLM span (messages,
output, token counts). Spans go to OTLP/JSON files through OpenTelemetry's own file exporter
(``opentelemetry-exporter-otlp-json-file``), one file per day. From ``--degrade-from`` on,
a share of the answers is degraded: the generator answers from a passage that was not
retrieved (an off-topic, ungrounded answer).

    pip install -e '.[traces,testset]'
    python examples/rag_system/traffic.py traces --days 2 --per-day 100 --degrade-from 2

Trace and span ids come from a seeded generator: the same arguments write the same traces. A day's file
is written whole or not at all (a hidden ``.traces-<day>.jsonl.partial``, renamed when the day is done): a
run that fails leaves no partial day for ``rag-eval traffic`` to read. Without an extra it needs, the
script says which in one line and exits 2, as ``rag-eval`` does.
"""
from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

ROUTES = {"chat": 0.7, "search": 0.3}
#: Turns of the conversations of each ten requests: five single questions, a session of two, one of three.
TURNS = (1, 1, 1, 1, 2, 1, 3)


def _tracer_provider(path: Path, seed: int):
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class SeededIds(IdGenerator):
        """Random ids from a seeded generator (the SDK's own are not reproducible)."""

        def __init__(self) -> None:
            self.random = random.Random(seed)

        def generate_span_id(self) -> int:
            return self.random.getrandbits(64) or 1

        def generate_trace_id(self) -> int:
            return self.random.getrandbits(128) or 1

    provider = TracerProvider(resource=Resource.create({"service.name": "fiqa-rag"}), id_generator=SeededIds())
    provider.add_span_processor(BatchSpanProcessor(FileSpanExporter(path)))
    return provider


def answer(question: str, passages: list[dict], degraded: bool, rng: random.Random) -> str:
    """The extractive answer from the retrieved passages, or, degraded, from an unrelated passage."""
    from rag_eval.metrics.sources.testset.baseline import extractive, load_corpus

    import rag_example

    if degraded:
        ids, texts = load_corpus(str(rag_example.CORPUS))
        retrieved = {p["id"] for p in passages}
        other = rng.choice([t for i, t in zip(ids, texts) if i not in retrieved])
        return extractive(other, [other], sentences=2)
    return extractive(question, [p["text"] for p in passages], sentences=2)


def conversation_sizes(requests: int) -> list[int]:
    """Turns of each conversation of a day of ``requests`` traced requests: of each ten, five single
    questions, a session of two turns and one of three (:data:`TURNS`), the last cut to fit."""
    sizes: list[int] = []
    turns = itertools.cycle(TURNS)
    while sum(sizes) < requests:
        sizes.append(min(next(turns), requests - sum(sizes)))
    return sizes


def _request(tracer, question: str, route: str, degraded: bool, t0: int, rng: random.Random, top_k: int,
             root_attributes: dict) -> int:
    """Trace one request started at ``t0`` (ns): a CHAIN span (``root_attributes`` set, ``None`` values
    left out) over a RETRIEVER and an LLM span. When it ended (ns)."""
    from openinference.semconv.trace import OpenInferenceSpanKindValues as Kind
    from openinference.semconv.trace import SpanAttributes as A
    from opentelemetry import trace

    import rag_example

    root = tracer.start_span("rag.query", start_time=t0)
    parent = trace.set_span_in_context(root)
    t1 = t0 + rng.randint(2, 8) * 1_000_000
    retriever = tracer.start_span("bm25.retrieve", context=parent, start_time=t1)
    passages = rag_example.bm25(question, top_k)
    retriever.set_attribute(A.OPENINFERENCE_SPAN_KIND, Kind.RETRIEVER.value)
    retriever.set_attribute(A.INPUT_VALUE, question)
    for i, passage in enumerate(passages):
        prefix = f"{A.RETRIEVAL_DOCUMENTS}.{i}."
        retriever.set_attribute(prefix + "document.id", passage["id"])
        retriever.set_attribute(prefix + "document.content", passage["text"])
        retriever.set_attribute(prefix + "document.score", passage["score"])
    t2 = t1 + rng.randint(10, 40) * 1_000_000
    retriever.end(end_time=t2)
    llm = tracer.start_span("extractive.generate", context=parent, start_time=t2)
    response = answer(question, passages, degraded, rng)
    prompt = "Answer from the passages.\n\n" + "\n\n".join(p["text"] for p in passages)
    llm.set_attribute(A.OPENINFERENCE_SPAN_KIND, Kind.LLM.value)
    llm.set_attribute("llm.input_messages.0.message.role", "system")
    llm.set_attribute("llm.input_messages.0.message.content", prompt)
    llm.set_attribute("llm.input_messages.1.message.role", "user")
    llm.set_attribute("llm.input_messages.1.message.content", question)
    llm.set_attribute(A.OUTPUT_VALUE, response)
    llm.set_attribute(A.LLM_MODEL_NAME, "extractive")
    prompt_tokens, completion_tokens = len((prompt + question).split()), len(response.split())
    llm.set_attribute(A.LLM_TOKEN_COUNT_PROMPT, prompt_tokens)
    llm.set_attribute(A.LLM_TOKEN_COUNT_COMPLETION, completion_tokens)
    llm.set_attribute(A.LLM_TOKEN_COUNT_TOTAL, prompt_tokens + completion_tokens)
    t3 = t2 + rng.randint(200, 1500) * 1_000_000
    llm.end(end_time=t3)
    root.set_attribute(A.OPENINFERENCE_SPAN_KIND, Kind.CHAIN.value)
    root.set_attribute(A.INPUT_VALUE, question)
    root.set_attribute(A.OUTPUT_VALUE, response)
    for key, value in root_attributes.items():
        if value is not None:
            root.set_attribute(key, value)
    end = t3 + rng.randint(1, 5) * 1_000_000
    root.end(end_time=end)
    return end


def simulate(out: Path, days: int = 2, per_day: int = 100, start: str = "2026-11-01", degrade_from: int | None = None,
             degraded_share: float = 0.5, seed: int = 0, top_k: int = 3) -> list[Path]:
    """Write ``per_day`` traced requests for each of ``days`` days from ``start`` (UTC) under
    ``out``, one ``traces-<day>.jsonl`` a day, each whole or not at all; from day ``degrade_from`` (1 = the
    first) on, each answer is degraded with probability ``degraded_share``. The files written."""
    questions = [json.loads(line)["user_input"] for line in (HERE / "questions.jsonl").read_text("utf-8").splitlines()
                 if line.strip()]
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    first = datetime.fromisoformat(start).replace(tzinfo=timezone.utc)
    written = []
    for day in range(days):
        begin = first + timedelta(days=day)
        path = out / f"traces-{begin:%Y-%m-%d}.jsonl"
        partial = path.with_name(f".{path.name}.partial")  # hidden: no trace reader takes it
        partial.unlink(missing_ok=True)  # the exporter appends
        provider = _tracer_provider(partial, seed * 1000 + day)
        try:
            _day(provider.get_tracer("rag_example"), begin, day, questions, rng, per_day, degrade_from,
                 degraded_share, top_k)
        except BaseException:  # a missing extra, Ctrl-C...: no part of the day is left
            provider.shutdown()
            partial.unlink(missing_ok=True)
            raise
        provider.shutdown()  # flushes the batch processor into the file
        partial.replace(path)
        written.append(path)
    return written


def _day(tracer, begin: datetime, day: int, questions: list[str], rng: random.Random, per_day: int,
         degrade_from: int | None, degraded_share: float, top_k: int) -> None:
    """Trace the ``per_day`` requests of day ``day`` (0: the first), which begins at ``begin``."""
    from openinference.semconv.trace import SpanAttributes as A

    sizes = conversation_sizes(per_day)
    starts = sorted(rng.uniform(0, 86_000) for _ in sizes)
    n = 0
    for c, (size, offset) in enumerate(zip(sizes, starts)):
        t0 = int((begin + timedelta(seconds=offset)).timestamp() * 1e9)
        session = f"session-{begin:%Y%m%d}-{c}" if size > 1 else None  # a single question has no session
        user = f"user-{rng.randrange(per_day // 2 + 1)}"
        route = rng.choices(list(ROUTES), weights=list(ROUTES.values()))[0]
        for _ in range(size):  # a follow-up comes 20 s to 2 min after the answer before it
            degraded = degrade_from is not None and day + 1 >= degrade_from and rng.random() < degraded_share
            end = _request(tracer, rng.choice(questions), route, degraded, t0, rng, top_k,
                           {A.SESSION_ID: session, A.USER_ID: user,
                            A.METADATA: json.dumps({"route": route, "request": n})})
            t0, n = end + rng.randint(20_000, 120_000) * 1_000_000, n + 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder of the OTLP/JSON span files")
    parser.add_argument("--days", type=int, default=2)
    parser.add_argument("--per-day", type=int, default=100)
    parser.add_argument("--start", default="2026-11-01", help="first day (UTC), YYYY-MM-DD")
    parser.add_argument("--degrade-from", type=int, help="first degraded day (1: the first day); default none")
    parser.add_argument("--degraded-share", type=float, default=0.5, help="share of answers degraded on those days")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from rag_eval.metrics.core.extras import require
    from rag_eval.metrics.errors import EXIT_USER, UserError

    try:
        require("opentelemetry.exporter.otlp.json.file", "traces", "Writing the example's traces")
        for path in simulate(args.out, args.days, args.per_day, args.start, args.degrade_from,
                             args.degraded_share, args.seed):
            print(f"wrote {path}")
    except UserError as exc:  # a missing extra (bm25s, the retriever's: testset), as rag-eval says it
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
