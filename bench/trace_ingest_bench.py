"""Bench: reading OTLP/JSON spans into samples against DuckDB's read_json on the same files.

Writes ``--spans`` spans (default 1,000,000) of OpenInference RAG traces (a CHAIN root, a
RETRIEVER span with three documents, an LLM span) into ``--files`` OTLP/JSON files (default
5), as OpenTelemetry's file exporter writes them: one ExportTraceServiceRequest a line, 512
spans a line (the batch span processor's batch). Then, each in a process of its own, in the
same run:

* ours: ``rag_eval.metrics.sources.traces.read_traces`` → ``rag_eval.metrics.sources.traces.parquet.write_traces`` (the samples
  as Parquet, what ``traffic_samples`` does for a partition), streaming, in one thread;
* DuckDB: ``CREATE TABLE spans AS SELECT * FROM read_json('<files>')`` (the lines loaded as
  rows of nested structs, nothing turned into samples).

Each process reports its wall time and its own peak resident memory (``VmHWM`` of
/proc/self/status), ours with its reader processes' peaks added (``RUSAGE_CHILDREN``'s
``ru_maxrss`` is the largest child only: each reader prints its own). The bounds: ours under
2x DuckDB's time, under 1.5 GB peak.

    .venv/bin/python bench/trace_ingest_bench.py                 # 1,000,000 spans
    .venv/bin/python bench/trace_ingest_bench.py --spans 100000  # a quick look
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORDS = ("bank account cheque deposit interest rate loan mortgage credit card fee transfer payment balance "
         "savings tax return invoice budget retirement fund stock bond dividend yield inflation market").split()
T0 = 1_793_491_200_000_000_000  # 2026-11-01T00:00:00Z


def _attr(key: str, value) -> dict:
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _trace(rng: random.Random, n: int) -> list[dict]:
    """The three spans of trace ``n``, children first (the order a batch exporter sees them end)."""
    trace = f"{rng.getrandbits(128):032x}"
    ids = [f"{rng.getrandbits(64):016x}" for _ in range(3)]
    start = T0 + n * 250_000_000  # four traces a second
    question = _text(rng, 10)[:-1] + "?"
    answer = _text(rng, 25)
    retriever = [_attr("openinference.span.kind", "RETRIEVER"), _attr("input.value", question)]
    for i in range(3):
        retriever += [_attr(f"retrieval.documents.{i}.document.id", f"doc-{rng.randrange(10 ** 6)}"),
                      _attr(f"retrieval.documents.{i}.document.content", _text(rng, 40)),
                      _attr(f"retrieval.documents.{i}.document.score", round(rng.uniform(1, 20), 3))]
    llm = [_attr("openinference.span.kind", "LLM"), _attr("output.value", answer),
           _attr("llm.token_count.prompt", 400), _attr("llm.token_count.completion", 40),
           _attr("llm.token_count.total", 440)]
    root = [_attr("openinference.span.kind", "CHAIN"), _attr("input.value", question), _attr("output.value", answer),
            _attr("session.id", f"s-{rng.randrange(10 ** 5)}"), _attr("user.id", f"u-{rng.randrange(10 ** 5)}")]

    def span(i, parent, begin, end, name, attributes):
        body = {"traceId": trace, "spanId": ids[i], "name": name, "kind": 1, "startTimeUnixNano": str(begin),
                "endTimeUnixNano": str(end), "attributes": attributes, "status": {}}
        if parent is not None:
            body["parentSpanId"] = ids[parent]
        return body

    ms = 1_000_000
    return [span(1, 0, start + 2 * ms, start + 30 * ms, "retrieve", retriever),
            span(2, 0, start + 30 * ms, start + 800 * ms, "generate", llm),
            span(0, None, start, start + 810 * ms, "query", root)]


def generate(folder: Path, spans: int, files: int, seed: int = 0) -> list[Path]:
    """Write ``spans`` spans (whole traces of three) into ``files`` files of 512-span lines."""
    rng = random.Random(seed)
    traces = -(-spans // 3)
    per_file = -(-traces // files)
    paths = []
    for f in range(files):
        path = folder / f"spans-{f}.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            batch: list[dict] = []
            for n in range(f * per_file, min(traces, (f + 1) * per_file)):
                batch += _trace(rng, n)
                if len(batch) >= 512:
                    handle.write(_line(batch))
                    batch = []
            if batch:
                handle.write(_line(batch))
        paths.append(path)
    return paths


def _line(spans: list[dict]) -> str:
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [_attr("service.name", "bench")]},
                                          "scopeSpans": [{"scope": {"name": "bench"}, "spans": spans}]}]},
                      separators=(",", ":")) + "\n"


def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(kind: str, folder: Path) -> None:
    """Measure one reader in this process; print its figures as JSON."""
    started = time.perf_counter()
    if kind == "ours":
        from rag_eval.metrics.sources.traces import read_traces
        from rag_eval.metrics.sources.traces.parquet import write_traces

        written = write_traces(read_traces(folder), folder / "samples.parquet")
        rows, problems = written.traces, len(written.problems)
    else:
        import duckdb

        with duckdb.connect() as connection:
            connection.execute(f"create table spans as select * from read_json('{folder}/spans-*.jsonl', "
                               "format = 'newline_delimited')")
            rows, problems = connection.execute("select count(*) from spans").fetchone()[0], 0
    print(json.dumps({"kind": kind, "seconds": time.perf_counter() - started, "cpu_seconds": time.process_time(),
                      "peak_mb": _peak_mb(), "rows": rows, "problems": problems}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=5)
    parser.add_argument("--folder", type=Path, help="where the span files go (default: a temporary folder); "
                        "files an earlier run left there for the same --spans and --files are used again")
    parser.add_argument("--child", choices=("ours", "duckdb"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.folder)
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.folder or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        marker = folder / ".spans"
        if marker.exists() and marker.read_text() == f"{args.spans} {args.files}":  # written by an earlier run
            paths = sorted(folder.glob("spans-*.jsonl"))
        else:
            paths = generate(folder, args.spans, args.files)
            marker.write_text(f"{args.spans} {args.files}")
        size = sum(p.stat().st_size for p in paths) / 1e6
        print(f"{args.spans:,} spans in {len(paths)} files ({size:,.0f} MB), written in "
              f"{time.perf_counter() - started:.0f} s")
        figures = {}
        for kind in ("duckdb", "ours"):
            done = subprocess.run([sys.executable, __file__, "--child", kind, "--folder", str(folder)],
                                  capture_output=True, text=True, check=True)
            figures[kind] = json.loads(done.stdout.strip().splitlines()[-1])
            f = figures[kind]
            print(f"{kind:>6}: {f['seconds']:.1f} s ({f['cpu_seconds']:.1f} s of CPU), peak {f['peak_mb']:,.0f} MB, "
                  f"{f['rows']:,} rows")
        ratio = figures["ours"]["seconds"] / figures["duckdb"]["seconds"]
        cpu = figures["ours"]["cpu_seconds"] / figures["duckdb"]["cpu_seconds"]
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(f"ours / DuckDB time: {ratio:.2f} (bound 2.00), CPU time {cpu:.2f}; ours peak "
              f"{figures['ours']['peak_mb']:,.0f} MB "
              f"(bound 1,536 MB); {figures['ours']['rows']:,} samples from {args.spans:,} spans, "
              f"{figures['ours']['problems']} problems")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
