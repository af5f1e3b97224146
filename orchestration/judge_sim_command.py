"""``rag-eval serve-judge-sim``: the simulated provider (``rag_eval.orchestration.judge_sim``) as a command,
and the seeded simulation it serves.

:class:`Simulation` holds the command's options (latency, jitter, faults, verdicts, seed); :func:`simulated`
is the script answering with them (:func:`~rag_eval.orchestration.judge_sim.oracle`'s valid answers, random
verdicts, latency and faults, seeded), which tests also give a ``JudgeServer`` in-process;
:func:`served` runs the command in a child process (the benches).
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import random
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from rag_eval.orchestration.judge_sim import JudgeServer, Reply, Seen, oracle, provider_error


@dataclass(frozen=True)
class Simulation:
    """How the simulated provider behaves (the options of ``rag-eval serve-judge-sim``).

    ``latency_ms`` ± ``jitter_ms`` (uniform) before every answer; each request is, with the
    probabilities ``fail_429``, ``fail_500`` and ``fail_timeout`` (their sum at most 1), a 429
    with ``Retry-After: retry_after_s``, a 500, or a hang of ``hang_s`` seconds before the
    answer; a chat answer is cut in half (malformed JSON) with probability ``malformed``.
    Every verdict-like 0/1 value is 1 with probability ``verdict_p1`` (``noncommittal``, a
    verdict against the answer, 0 with that probability); ratings (0-2) and Likert scores (1-5)
    are uniform when ``verdict_p1`` is below 1, else their top value. The faults are drawn from
    ``seed``, the answer's values from ``seed``, the request's ``seed`` and its messages (the same
    request gets the same answer; a judge's repeats, which change the request's seed, do not).

    Raises
    ------
    ValueError
        For a probability outside 0..1, fault probabilities summing above 1, or a negative time.
    """

    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    fail_429: float = 0.0
    fail_500: float = 0.0
    fail_timeout: float = 0.0
    hang_s: float = 120.0
    retry_after_s: float = 1.0
    malformed: float = 0.0
    verdict_p1: float = 1.0
    seed: int = 1

    def __post_init__(self) -> None:
        from rag_eval.metrics.errors import SettingsError
        for name in ("fail_429", "fail_500", "fail_timeout", "malformed", "verdict_p1"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise SettingsError(f"--{name.replace('_', '-')} must be within 0..1, not {getattr(self, name)}")
        if self.fail_429 + self.fail_500 + self.fail_timeout > 1.0:
            raise SettingsError("--fail-429 + --fail-500 + --fail-timeout must not exceed 1")
        for name in ("latency_ms", "jitter_ms", "hang_s", "retry_after_s"):
            if not 0 <= getattr(self, name) < math.inf:  # nan and inf too
                raise SettingsError(f"--{name.replace('_', '-')} must be a finite number, not negative")


def random_verdicts(p1: float, rng: random.Random) -> Callable[[str, str | None], Any]:
    """A ``decide`` for :func:`oracle`: a verdict is 1 with probability ``p1`` (``noncommittal``, a
    verdict against the answer, 0); a rating 0-2 and a Likert score 1-5 uniform (their top value
    when ``p1`` is 1); no entities."""
    def decide(name: str, key: str | None) -> Any:
        if name == "noncommittal":
            return int(rng.random() >= p1)
        if name == "rating":
            return 2 if p1 == 1.0 else rng.randint(0, 2)
        if name == "score":
            return 5 if p1 == 1.0 else rng.randint(1, 5)
        if name == "entities":
            return []
        return int(rng.random() < p1)
    return decide


def from_the_prompt(answer: dict[str, Any], prompt: str, rng: random.Random) -> dict[str, Any]:
    """A test set's generated question: ``answer`` with its top-level ``question`` and ``answer``
    strings made of a random run of the prompt's words, so that questions differ as a model's
    would: "What is said about <4 words>?" and 12 words."""
    words = re.findall(r"\w+", prompt)
    if not words:
        return answer
    for name, size in (("question", 4), ("answer", 12)):
        if isinstance(answer.get(name), str):
            start = rng.randrange(max(1, len(words) - size + 1))
            text = " ".join(words[start:start + size])
            answer[name] = f"What is said about {text}?" if name == "question" else text
    return answer


def simulated(simulation: Simulation) -> Callable[[Seen], Reply]:
    """The script of ``rag-eval serve-judge-sim``: :func:`oracle`'s valid answers with the
    latency, faults and verdicts of ``simulation`` (see :class:`Simulation`)."""
    faults = random.Random(simulation.seed)
    lock = threading.Lock()

    def script(seen: Seen) -> Reply:
        with lock:
            delay = max(0.0, simulation.latency_ms + faults.uniform(-1, 1) * simulation.jitter_ms) / 1000
            draw, broken = faults.random(), faults.random() < simulation.malformed
        if draw < simulation.fail_429:
            retry = simulation.retry_after_s
            reply = provider_error(429, f"Rate limit reached. Please try again in {retry:g}s.", "rate_limit_exceeded")
            reply.headers = {"retry-after": str(max(1, round(retry))), "retry-after-ms": str(int(retry * 1000))}
            reply.fault, reply.delay = "random_429", delay
            return reply
        draw -= simulation.fail_429
        if draw < simulation.fail_500:
            return Reply(status=500, delay=delay, fault="random_500", body={"error": {
                "message": "The server had an error while processing your request.", "type": "server_error"}})
        hang = draw - simulation.fail_500 < simulation.fail_timeout
        asked = json.dumps([seen.body.get("seed"), seen.body.get("messages", seen.body.get("input"))]).encode()
        rng = random.Random(hashlib.sha256(b"%d|" % simulation.seed + asked).digest())
        reply = oracle(random_verdicts(simulation.verdict_p1, rng))(seen)
        if reply.content is not None and seen.kind == "question_generation":
            reply.content = json.dumps(from_the_prompt(json.loads(reply.content), seen.prompt, rng), ensure_ascii=False)
        reply.delay = simulation.hang_s if hang else delay
        reply.fault = "timeout" if hang else None
        if broken and reply.content is not None:
            reply.content, reply.fault = reply.content[: len(reply.content) // 2], "malformed"
        return reply
    return script


def _whole(high: int):
    """An argparse type: a whole number from 0 to ``high``."""
    def parse(text: str) -> int:
        value = int(text)
        if not 0 <= value <= high:
            raise argparse.ArgumentTypeError(f"{text}: give a whole number from 0 to {high}")
        return value
    parse.__name__ = "int"  # argparse names the type in its message ("invalid int value")
    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``rag-eval serve-judge-sim``."""
    parser.description = (
        "Serve a simulated OpenAI-compatible LLM provider (chat completions, embeddings, models) for trying "
        "and benchmarking the LLM judge with no model and no network. Its first output line is "
        "`listening on http://HOST:PORT/v1`: set OPENAI_BASE_URL to that URL (and OPENAI_API_KEY to any "
        "value, or to --api-key) and run `rag-eval run`. Every chat request gets valid JSON for the schema it "
        "carries; GET /stats counts requests per endpoint, statuses and faults (POST /reset clears them). "
        "Stop it with Ctrl-C or SIGTERM.")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=_whole(65535), default=0, help="port; 0 picks a free one (default 0)")
    latency = parser.add_argument_group("latency")
    latency.add_argument("--latency-ms", type=float, default=0.0, help="mean delay of every answer (default 0)")
    latency.add_argument("--jitter-ms", type=float, default=0.0, help="uniform ± jitter on the delay (default 0)")
    faults = parser.add_argument_group("faults and limits")
    faults.add_argument("--max-concurrency", type=_whole(10**6), default=0,
                        help="requests in flight above this get a 429 at once (default 0: no limit)")
    faults.add_argument("--fail-429", type=float, default=0.0, metavar="P",
                        help="probability of a 429 rate-limit reply with Retry-After (default 0)")
    faults.add_argument("--fail-500", type=float, default=0.0, metavar="P", help="probability of a 500 (default 0)")
    faults.add_argument("--fail-timeout", type=float, default=0.0, metavar="P",
                        help="probability of hanging --hang-s seconds before answering (default 0)")
    faults.add_argument("--hang-s", type=float, default=120.0, help="how long a hang lasts (default 120)")
    faults.add_argument("--retry-after-s", type=float, default=1.0, help="Retry-After of a 429 (default 1)")
    faults.add_argument("--malformed", type=float, default=0.0, metavar="P",
                        help="probability that a chat answer is malformed JSON (default 0)")
    faults.add_argument("--api-key", help="answer 401 to requests without `Authorization: Bearer KEY`")
    answers = parser.add_argument_group("answers")
    answers.add_argument("--verdict-p1", type=float, default=1.0, metavar="P",
                         help="probability that a 0/1 verdict is 1; below 1, ratings and Likert scores are "
                              "random too (default 1: every verdict 1, the top rating and score)")
    answers.add_argument("--seed", type=int, default=1, help="seed of the random verdicts and faults (default 1)")
    parser.set_defaults(handler=serve, uses_instance=False)


def serve(args: argparse.Namespace) -> int:
    """``rag-eval serve-judge-sim``: serve until Ctrl-C or SIGTERM (status 0)."""
    simulation = Simulation(**{name: getattr(args, name) for name in Simulation.__dataclass_fields__})
    server = JudgeServer(args.host, args.port, record=False)
    server.script, server.api_key = simulated(simulation), args.api_key
    server.max_concurrency = args.max_concurrency
    server.start()
    print(f"listening on {server.url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
        print("serve-judge-sim: stopped; served " + json.dumps(server.stats()["requests"]), file=sys.stderr)
    return 0


@contextlib.contextmanager
def served(*arguments: str) -> Iterator[str]:
    """``rag-eval serve-judge-sim --port 0 ARGUMENTS`` in a child process (its threads off this
    process's interpreter lock, as a provider would be): yields its ``/v1`` base URL, and stops it
    (SIGTERM) on leaving.

    Raises
    ------
    RuntimeError
        When the command does not start (bad arguments: its error message is included).
    """
    process = subprocess.Popen([sys.executable, "-m", "rag_eval.orchestration.cli", "serve-judge-sim", "--port", "0",
                                *arguments], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline().strip() if process.stdout else ""
        if not line.startswith("listening on "):
            process.wait(timeout=30)
            raise RuntimeError(f"rag-eval serve-judge-sim did not start: {process.stderr.read().strip() if process.stderr else ''}")
        yield line.removeprefix("listening on ")
    finally:
        process.terminate()
        process.communicate(timeout=30)
