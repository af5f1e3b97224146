"""The main job against the library it wraps and the client underneath, in one run.

For the same dataset and the same server (``rag-eval serve-judge-sim``, 200 ± 50 ms
latency by default) it measures, as rows/s and as a share of the ceiling:

* ``library``: ``rag_eval.metrics.evaluate`` with the LLM judge (the five core metrics), timed
  around the call in a fresh process;
* ``main job``: the whole wall time of ``rag-eval run FILE --concurrency C`` (start-up,
  Dagster, ingestion, metrics, summary, exit) with a fresh cache and instance;
* ``ceiling``: a bare ``AsyncOpenAI`` client (aiohttp transport, as the judge) sending the
  same number of requests per row as the library path did, ``C`` at a time;
* ``re-run``: ``rag-eval run`` again on the same cache (zero requests expected), its wall
  time and that time beyond a bare ``python -c pass``;
* ``offline``: ``rag-eval run`` without an endpoint at each ``--offline-rows`` size: rows/s,
  the CPU seconds of its whole process tree (``rag-eval`` and any children) and the tree's peak memory (the
  summed proportional set size of its processes at its peak, and the summed RSS, an upper
  bound; sampled from /proc, see :func:`timed`), beside the peak RSS of the ``rag-eval``
  process alone (its ``VmHWM``; not ``os.wait4``'s ``ru_maxrss``, which counts the pages the
  child had before its ``exec``: this bench's own, 1.8 GB once it has made 100,000 rows);
  ``--memory-check`` adds a 100,000-row run and says how its peaks compare with the 1.5 GB
  bound (measured: the offline judge's memos and caches are bounded, so no slope between
  smaller sizes projects it).

Every line carries the 1-minute load average when it was printed (the machine is shared).

Rows: the repository's FiQA and amnesty_qa examples (50 rows), tiled to the wanted count;
every copy gets a distinct tag word in its question, response, reference and first context,
so no two rows share a judgement (nothing is answered from a cache or an in-flight twin).
Repetitions alternate the order of the paths (the machine is shared; read ratios within a
run). Run from the repo root, e.g.::

    .venv/bin/python bench/pipeline_bench.py --rows 1000 --concurrency 64 --repeat 3 \\
        --offline-rows 1000,10000
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from rag_eval.orchestration.judge_sim_command import served

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
EXAMPLES = [REPO / "examples" / "fiqa" / "samples.jsonl", REPO / "examples" / "amnesty_qa" / "samples.jsonl"]
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
#: The version size of the memory check (``--memory-check``) and its bound on peak memory (issue 13).
MEMORY_CHECK_ROWS, MEMORY_BOUND_MB = 100_000, 1500


def tag(k: int) -> str:
    """A distinct pronounceable word per ``k`` without digits (digits would change the
    offline judge's number checks): 0 -> ``baba``, 1 -> ``babe``..."""
    word = ""
    for _ in range(3):
        k, rest = divmod(k, len(_SYLLABLES))
        word = _SYLLABLES[rest] + word
    return word


def make_rows(n: int) -> list[dict]:
    """``n`` distinct rows tiled from the examples (see the module docstring)."""
    base = [json.loads(line) for path in EXAMPLES for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]
    rows = []
    for k in range(n):
        row, word = dict(base[k % len(base)]), tag(k)
        row["id"] = f"bench-{k}"
        row["user_input"] = f"{row['user_input']} ({word})"
        row["response"] = f"{row['response']} ({word})"
        reference = row["reference"]
        row["reference"] = [*reference[:-1], f"{reference[-1]} ({word})"] if isinstance(reference, list) \
            else f"{reference} ({word})"
        row["retrieved_contexts"] = [f"{row['retrieved_contexts'][0]} ({word})", *row["retrieved_contexts"][1:]]
        rows.append(row)
    return rows


def write_rows(rows: list[dict], path: Path) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def server(root: str, path: str, post: bool = False) -> dict:
    request = urllib.request.Request(f"{root}/{path}", method="POST" if post else "GET")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def requests_served(root: str) -> tuple[int, int]:
    """(chat, embeddings) requests since the last reset."""
    counts = server(root, "stats").get("requests", {})
    return (sum(v for k, v in counts.items() if "chat" in k), sum(v for k, v in counts.items() if "embedding" in k))


def _tree(root: int) -> list[int]:
    """``root`` and every process descending from it (each thread's children, from /proc)."""
    tree, todo = [], [root]
    while todo:
        tree.append(pid := todo.pop())
        try:
            for thread in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{thread}/children") as children:
                    todo += [int(child) for child in children.read().split()]
        except OSError:  # gone meanwhile
            pass
    return tree


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        return b""


def _rss_cpu(pid: int) -> tuple[float, float]:
    """(resident MB, CPU seconds so far) of process ``pid``; zeros once it is gone."""
    statm, stat = _read(f"/proc/{pid}/statm").split(), _read(f"/proc/{pid}/stat").rsplit(b")", 1)[-1].split()
    if len(statm) < 2 or len(stat) < 13:
        return 0.0, 0.0
    resident_mb = int(statm[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    return resident_mb, (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def _hwm(pid: int) -> float:
    """High-water mark of ``pid``'s resident memory in MB since its ``exec`` (``VmHWM``; 0 once gone)."""
    line = next((line for line in _read(f"/proc/{pid}/status").splitlines() if line.startswith(b"VmHWM:")), b"0 0")
    return int(line.split()[1]) / 1024


def _pss(pid: int) -> float:
    """Proportional set size of ``pid`` in MB (its shared pages split between their sharers);
    about 15 ms of CPU for a 500 MB process, so read only at the tree's new peaks."""
    return sum(int(line.split()[1]) for line in _read(f"/proc/{pid}/smaps_rollup").splitlines()
               if line.startswith(b"Pss:")) / 1024


#: The children of a ``rag-eval`` process told apart in the CPU figures, by their command line (none
#: since great-expectations runs in the check's own step: ``rag_eval.assets.expectations``).
_ROLES: dict[str, bytes] = {}


def timed(command: list[str], env: dict | None = None, timeout: float = 7200) -> dict:
    """Run ``command``; its wall time, exit status, peak RSS (MB, that process alone: its
    ``VmHWM`` at the last sample), the tail of stderr, and, over the whole process tree (the
    command and every process under it) sampled every 0.25 s:
    its CPU seconds (``cpu_s``: each process's last sample), the peak of its summed RSS
    (``tree_rss_mb``: pages its processes share counted once per process, an upper bound) and
    its summed PSS at the highest of those samples (``tree_mb``, read at most every 2 s); the
    CPU seconds by kind of process (``cpu_by``: the command, any other)."""
    start = time.perf_counter()
    rss_peak, pss_peak, pss_read, cpu, roles, own_peak = 0.0, 0.0, 0.0, {}, {}, 0.0
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=err, cwd=REPO, start_new_session=True)
        deadline, sampled = start + timeout, 0.0
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            now = time.perf_counter()
            if now > deadline:
                os.killpg(process.pid, 9)
                raise TimeoutError(f"{command[:3]} exceeded {timeout} s")
            if now - sampled >= 0.25:
                own_peak = max(own_peak, _hwm(process.pid))
                sampled, tree, rss = now, _tree(process.pid), 0.0
                for member in tree:
                    if roles.get(member, "other") == "other":  # again until it has exec'd its command
                        roles[member] = next((role for role, marker in _ROLES.items() if marker in _read(
                            f"/proc/{member}/cmdline")), "other") if member != process.pid else "main"
                    resident, seconds = _rss_cpu(member)
                    rss += resident
                    cpu[member] = max(cpu.get(member, 0.0), seconds)
                if rss > rss_peak:  # PSS read at the tree's new peaks, at most every 2 s
                    rss_peak = rss
                    if now - pss_read >= 2.0:
                        pss_read, pss_peak = now, max(pss_peak, sum(_pss(member) for member in tree))
            time.sleep(0.05)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        # its own CPU: what wait4 counts (itself and the children it reaped) less its children's samples
        cpu[process.pid] = max(cpu.get(process.pid, 0.0), usage.ru_utime + usage.ru_stime - sum(
            seconds for member, seconds in cpu.items() if member != process.pid))
        err.seek(0)
        out.seek(0)
        return {"wall_s": wall, "exit": process.returncode, "peak_mb": own_peak, "tree_mb": pss_peak,
                "tree_rss_mb": rss_peak, "cpu_s": sum(cpu.values()),
                "cpu_by": {role: sum(seconds for member, seconds in cpu.items() if roles.get(member, "main") == role)
                           for role in ("main", *_ROLES, "other")},
                "stderr": err.read().decode(errors="replace")[-2000:], "stdout": out.read().decode(errors="replace")}


def judge_env(base_url: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EMBEDDING_"))}
    if base_url:
        env.update(OPENAI_BASE_URL=f"{base_url}/v1", OPENAI_API_KEY="sk-bench", OPENAI_MODEL="judge-sim",
                   EMBEDDING_MODEL="judge-sim-embed")
    return env


LIBRARY = """
import json, sys, time
import openai  # imported before the timing, whichever module imports it first
from rag_eval.metrics import evaluate
from rag_eval.metrics.judges.llm import LLMConfig, LLMJudge
rows = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
judge = LLMJudge(LLMConfig.from_env(concurrency=int(sys.argv[2]), cache_path=sys.argv[3]))
start = time.perf_counter()
result = evaluate(rows, judge=judge)
print(json.dumps({"evaluate_s": time.perf_counter() - start,
                  "statuses": result.results["status"].value_counts().to_dict()}))
"""


def library(path: Path, rows: int, concurrency: int, root: str, scratch: Path) -> dict:
    server(root, "reset", post=True)
    cache = scratch / f"lib-{time.monotonic_ns()}.sqlite"
    run = timed([sys.executable, "-c", LIBRARY, str(path), str(concurrency), str(cache)], env=judge_env(root))
    if run["exit"]:
        raise RuntimeError(f"library path failed: {run['stderr']}")
    reply = json.loads(run["stdout"].strip().splitlines()[-1])
    chat, embeddings = requests_served(root)
    return {"rows_per_s": rows / reply["evaluate_s"], "wall_s": reply["evaluate_s"], "chat": chat,
            "embeddings": embeddings, "statuses": reply["statuses"]}


def main_job(path: Path, rows: int, concurrency: int, root: str | None, project: Path,
             extra: list[str] | None = None) -> dict:
    """``rag-eval run`` in ``project`` (its datasets/, out/, instance and cache)."""
    if root:
        server(root, "reset", post=True)
    env = {**judge_env(root), "DAGSTER_HOME": str(project / "dagster_home")}
    command = [str(BIN / "rag-eval"), "run", str(path), "--datasets", str(project / "datasets"),
               "--out", str(project / "out"), *(extra or [])]
    if root:
        command += ["--concurrency", str(concurrency), "--cache-path", str(project / "cache.sqlite")]
    run = timed(command, env=env)
    if run["exit"] not in (0, 3):
        raise RuntimeError(f"rag-eval run failed ({run['exit']}): {run['stderr']}")
    chat, embeddings = requests_served(root) if root else (0, 0)
    return {"rows_per_s": rows / run["wall_s"], "wall_s": run["wall_s"], "chat": chat, "embeddings": embeddings,
            "peak_mb": run["peak_mb"], "tree_mb": run["tree_mb"], "tree_rss_mb": run["tree_rss_mb"],
            "cpu_s": run["cpu_s"], "cpu_by": run["cpu_by"]}


#: A structured-output request as the judge's are (the simulated endpoint answers those only).
VERDICT_FORMAT = {"type": "json_schema", "json_schema": {"name": "verdict", "strict": True, "schema": {
    "type": "object", "properties": {"verdict": {"type": "integer", "enum": [0, 1]}}, "required": ["verdict"],
    "additionalProperties": False}}}


def ceiling(rows: int, per_row: float, concurrency: int, root: str) -> dict:
    """A bare client sending ``rows x per_row`` small chat requests, ``concurrency`` at a time
    (timed from the first request: the client's import and connection set-up are not counted)."""
    import openai

    total = round(rows * per_row)

    async def go() -> float:
        client = openai.AsyncOpenAI(base_url=f"{root}/v1", api_key="sk-bench", max_retries=0,
                                    http_client=openai.DefaultAioHttpClient(timeout=60))
        limit = asyncio.Semaphore(concurrency)
        await client.models.list()  # connection pool and lazy imports warmed up outside the timing

        async def one(i: int) -> None:
            async with limit:
                await client.chat.completions.create(model="judge-sim", messages=[
                    {"role": "user", "content": f"Is statement {i} supported? Answer yes or no."}],
                    response_format=VERDICT_FORMAT)

        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(total)))
        wall = time.perf_counter() - start
        await client.close()
        return wall

    server(root, "reset", post=True)
    wall = asyncio.run(go())
    return {"rows_per_s": rows / wall, "wall_s": wall, "requests": total}


def python_startup() -> float:
    return min(timed([sys.executable, "-c", "pass"])["wall_s"] for _ in range(3))


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def llm_section(args: argparse.Namespace, scratch: Path) -> list[str]:
    lines = []
    with served("--latency-ms", str(args.latency_ms), "--jitter-ms", str(args.jitter_ms)) as url:
        root = url.removesuffix("/v1")
        for rows, concurrency in [(args.rows, c) for c in args.concurrency] + [(20, c) for c in args.concurrency]:
            data = write_rows(make_rows(rows) if rows != 20 else
                              [json.loads(line) for line in EXAMPLES[1].read_text(encoding="utf-8").splitlines()],
                              scratch / f"rows-{rows}.jsonl")
            lib_runs, job_runs, ceil_runs, rerun_runs = [], [], [], []
            for repetition in range(args.repeat):
                order = ["library", "job", "ceiling"] if repetition % 2 == 0 else ["ceiling", "job", "library"]
                for which in order:
                    if which == "library":
                        lib_runs.append(library(data, rows, concurrency, root, scratch))
                    elif which == "job":
                        project = scratch / f"job-{rows}-{concurrency}-{repetition}"
                        job_runs.append(main_job(data, rows, concurrency, root, project))
                        rerun_runs.append(main_job(data, rows, concurrency, root, project))
                    else:
                        per_row = (lib_runs or job_runs)[-1]
                        per_row = (per_row["chat"] + per_row["embeddings"]) / rows if per_row else 6.0
                        ceil_runs.append(ceiling(rows, per_row, concurrency, root))
            top = median(ceil_runs, "rows_per_s")
            lib, job = median(lib_runs, "rows_per_s"), median(job_runs, "rows_per_s")
            per_row = (lib_runs[-1]["chat"] + lib_runs[-1]["embeddings"]) / rows
            rerun = median(rerun_runs, "wall_s")
            lines.append(f"| {rows} | {concurrency} | {per_row:.2f} | {top:.1f} | {lib:.1f} ({lib / top:.0%}) | "
                         f"{job:.1f} ({job / top:.0%}) | {job / lib:.0%} | {rerun:.2f} s ({rerun - args.startup:.2f} s "
                         f"beyond start-up), {sum(r['chat'] + r['embeddings'] for r in rerun_runs)} requests | "
                         f"{os.getloadavg()[0]:.1f} |")
            print(lines[-1], flush=True)
            if args.verbose:
                print(json.dumps({"library": lib_runs, "job": job_runs, "ceiling": ceil_runs, "rerun": rerun_runs},
                                 default=str), file=sys.stderr)
    return lines


def offline_section(args: argparse.Namespace, scratch: Path) -> list[str]:
    lines = []
    for rows in args.offline_rows:
        data = write_rows(make_rows(rows), scratch / f"offline-{rows}.jsonl")
        run = main_job(data, rows, 0, None, scratch / f"offline-{rows}")
        lines.append(f"| {rows} | {run['rows_per_s']:.1f} | {run['wall_s']:.1f} | {run['cpu_s']:.1f} | "
                     f"{rows / run['cpu_s']:.1f} | {run['tree_mb']:.0f} | {run['tree_rss_mb']:.0f} | "
                     f"{run['peak_mb']:.0f} | {' / '.join(f'{v:.1f}' for v in run['cpu_by'].values())} | "
                     f"{os.getloadavg()[0]:.1f} |")
        print(lines[-1], flush=True)
        if rows == MEMORY_CHECK_ROWS:  # measured, not projected: the memos and caches are bounded
            peak = max(run["tree_mb"], run["peak_mb"])
            lines.append(f"{rows:,} rows: peak {run['tree_mb']:.0f} MB for the whole tree (PSS), {run['peak_mb']:.0f} MB "
                         f"for rag-eval alone (RSS high-water mark): {peak / MEMORY_BOUND_MB:.0%} of the "
                         f"{MEMORY_BOUND_MB} MB bound")
            print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1000, help="distinct rows of the LLM runs (default 1000)")
    parser.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[64],
                        help="judge concurrency, comma-separated (default 64)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions, alternating the order (default 3)")
    parser.add_argument("--latency-ms", type=float, default=200)
    parser.add_argument("--jitter-ms", type=float, default=50)
    parser.add_argument("--offline-rows", type=lambda s: [int(x) for x in s.split(",") if x], default=[1000, 10000],
                        help="offline run sizes, comma-separated; empty to skip (default 1000,10000)")
    parser.add_argument("--memory-check", action="store_true", help="also an offline run of 100,000 rows "
                        "(peak memory bound: 1.5 GB)")
    parser.add_argument("--skip-llm", action="store_true", help="offline runs only")
    parser.add_argument("--verbose", action="store_true", help="every run's figures as JSON on stderr")
    args = parser.parse_args()
    args.offline_rows += [MEMORY_CHECK_ROWS] if args.memory_check else []
    args.startup = python_startup()

    load = os.getloadavg()
    print(f"# pipeline bench: {os.cpu_count()} cores, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at start; "
          f"Python start-up {args.startup:.2f} s; server latency {args.latency_ms:g} ± {args.jitter_ms:g} ms; "
          f"medians of {args.repeat} alternating repetitions", flush=True)
    with tempfile.TemporaryDirectory(prefix="pipeline-bench-") as scratch:
        if not args.skip_llm:
            print("\n| rows | c | requests/row | ceiling rows/s | library rows/s (% ceiling) | main job rows/s "
                  "(% ceiling) | job/library | zero-request re-run | load |\n|---|---|---|---|---|---|---|---|---|", flush=True)
            llm_section(args, Path(scratch))
        if args.offline_rows:
            print("\n| offline rows | rows/s | wall s | CPU s, whole tree | rows per CPU s | peak MB, whole tree "
                  "(PSS) | peak MB, whole tree (RSS summed) | peak MB, rag-eval alone (RSS) | CPU s: rag-eval / "
                  "other | load |\n|---|---|---|---|---|---|---|---|---|---|",
                  flush=True)
            offline_section(args, Path(scratch))
    load = os.getloadavg()
    print(f"\n# load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the end", flush=True)


if __name__ == "__main__":
    main()
