"""``rag-eval run --dry-run``: the requests, tokens and price a run would send, sending
nothing and registering nothing; and the endpoint check made before a real run."""
from __future__ import annotations

import argparse
import collections
import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag_eval.metrics.core.registry import Registry
    from rag_eval.orchestration.settings import RunSettings


def check_judge(judge_resource: Any) -> None:
    """Check the LLM judge's endpoint (reachability, key, model) before anything is
    registered or spent; nothing to check for the offline judge.

    Raises
    ------
    EndpointError
        An OSError: ``rag-eval`` exits with status 2 and the cause.
    ValueError
        A base URL with credentials.
    """
    from rag_eval.metrics.judges.llm import LLMJudge

    judge = judge_resource.get_judge()
    if isinstance(judge, LLMJudge):
        try:
            judge.check_endpoint()
        except OSError:
            judge.close()  # its connections, before the process exits with status 2
            raise


def parse_price(text: str | None) -> tuple[float, float] | None:
    """``"0.15,0.60"`` → (0.15, 0.6): prices per million prompt and completion tokens
    (one number is both).

    Raises
    ------
    ValueError
        For anything but one or two finite non-negative numbers.
    """
    from rag_eval.metrics.errors import SettingsError
    if text is None:
        return None
    try:
        parts = [float(p) for p in text.split(",")]
    except ValueError:
        parts = []
    if len(parts) not in (1, 2) or not all(0 <= p < math.inf for p in parts):  # nan and inf too
        raise SettingsError(f"--price {text!r}: give PROMPT[,COMPLETION], prices per million tokens, e.g. 0.15,0.60")
    return parts[0], parts[-1]


def estimated(settings: RunSettings, registry: Registry, files: list[Path], read_only_cache: bool = False):
    """``(estimate, judge)``: what scoring the samples of ``files`` with the metrics, options and
    judge of ``settings`` (metrics of ``registry``) would send, after the judgement cache
    (``rag_eval.metrics.judges.cost``; ``read_only_cache``: a judge of its own that only reads it,
    ``JudgeResource.get_judge``)."""
    from rag_eval.metrics.judges.cost import estimate_cost
    from rag_eval.metrics.judges.config import PER_METRIC
    from rag_eval.metrics.judges.llm import LLMJudge
    from rag_eval.metrics.core.registry import build_metrics
    from rag_eval.metrics.core.samples import load_samples

    config = {name: settings.metric_options.get(name, {}) for name in settings.metrics}
    options = {n: {k: v for k, v in c.items() if k not in ("threshold", *PER_METRIC)} for n, c in config.items()}
    metrics = build_metrics(list(settings.metrics), {n: c["threshold"] for n, c in config.items() if "threshold" in c},
                            {n: o for n, o in options.items() if o}, registry)
    judge = settings.judge.get_judge(read_only_cache=read_only_cache)
    judges = {n: judge.with_options(**{k: c[k] for k in PER_METRIC if k in c})
              for n, c in config.items() if isinstance(judge, LLMJudge) and c.keys() & set(PER_METRIC)}
    samples = [sample for file in files for sample in load_samples(file)]
    return estimate_cost(samples, metrics, judge, judges), judge


def priced_budget(settings: RunSettings, args: argparse.Namespace) -> RunSettings:
    """``settings`` with a strong budget checked against the dataset (``run``: no conversation, no more rows
    than its lines), and one in
    money (``{"cost": ..., "currency": ...}``, ``rag_eval.orchestration.settings.strong_budget``) turned into rows: as many as the sum buys
    when each costs what the strong judge would send for it on every selected metric, as the dry
    run prices them (after the judgement cache, at ``--price``), at most every row; said on stderr.
    Other settings are returned as they are.

    Raises
    ------
    SettingsError
        A line of the dataset holding a conversation's turns (``run``: a cascade's draw is keyed by line,
        ``rag_eval.metrics.core.strong.single_turn_lines``); more rows than the dataset's lines; a sum without ``--price``, or with ``backfill`` (its versions'
        rows are not known in advance), or that buys no row.
    """
    import sys

    from rag_eval.assets.registration import dataset_file
    from rag_eval.metrics.core.samples import iter_samples
    from rag_eval.metrics.core.strong import single_turn_lines
    from rag_eval.metrics.errors import SettingsError
    from rag_eval.metrics.judges.llm import LLMJudge

    if settings.strong is None:
        return settings
    if args.command == "run":  # a conversation's turns on one line, refused before the file is registered
        collections.deque(single_turn_lines(iter_samples(dataset_file(Path(args.dataset)))), maxlen=0)
    if "rows" in settings.strong and args.command == "run":
        with open(dataset_file(Path(args.dataset)), "rb") as stream:
            lines = sum(1 for line in stream if line.strip())
        if settings.strong["rows"] > lines:
            raise SettingsError(f"--strong-budget {settings.strong['rows']}: more rows than {args.dataset}'s {lines} "
                                f"lines; give at most {lines}, or a share (0.1)")
    if "cost" not in settings.strong:
        return settings
    cost, currency = settings.strong["cost"], settings.strong["currency"]
    if args.command != "run":
        raise SettingsError(f"--strong-budget {cost:g}{currency}: a sum applies to rag-eval run (one dataset); give a "
                            "share of the rows or a number of rows")
    price = parse_price(args.price)
    if price is None:
        raise SettingsError(f"--strong-budget {cost:g}{currency}: give the strong judge's prices too, "
                            "--price PROMPT[,COMPLETION] per million tokens")
    assert settings.strong_judge is not None  # a cascade's settings have both judges
    estimate, judge = estimated(replace(settings, judge=settings.strong_judge), args.registry,
                                [dataset_file(Path(args.dataset))], read_only_cache=True)
    if isinstance(judge, LLMJudge):
        judge.close()
    each = estimate.cost(*price) / max(estimate.rows, 1)
    rows = estimate.rows if each == 0 else min(estimate.rows, math.floor(cost / each))
    if rows < 1:
        raise SettingsError(f"--strong-budget {cost:g}{currency} buys no row: the strong judge's requests for one row "
                            f"cost about {each:.4g}{currency} at --price {args.price}")
    print(f"--strong-budget {cost:g}{currency}: {rows} of {estimate.rows} rows per metric, at about {each:.4g}{currency} "
          "a row for the strong judge (the dry run's estimate, after the judgement cache)", file=sys.stderr)
    strong = {k: v for k, v in settings.strong.items() if k not in ("cost", "currency")}
    return replace(settings, strong={**strong, "rows": rows})


def _files(args: argparse.Namespace) -> list[Path]:
    """The dataset files ``rag-eval run`` (its dataset) or ``backfill`` (the versions under
    ``--datasets`` between ``--from`` and ``--to``) reads."""
    from rag_eval.assets.registration import dataset_file

    if args.command != "backfill":
        return [dataset_file(Path(args.dataset))]
    folders = sorted(p for p in Path(args.datasets).iterdir() if (p / "samples.jsonl").is_file()) \
        if Path(args.datasets).is_dir() else []
    return [p / "samples.jsonl" for p in folders
            if (not args.start or p.name >= args.start) and (not args.end or p.name <= args.end)]


def most_answers(args: argparse.Namespace):
    """At most how many answers ``rag-eval run`` or ``backfill`` could buy, without planning its
    requests: lines × selected metrics × ``--max-row-requests`` (each counted as a chat answer and as
    an embedding, ``rag_eval.metrics.judges.probe.Expected``); ``None`` without a per-row limit.
    The room check tries this bound first and plans the requests (:func:`expected_answers`) only
    when the disk has less room than it needs.

    Raises
    ------
    ValueError, OSError
        For arguments or a dataset the command itself refuses (it says why).
    """
    from rag_eval.metrics.core.registry import resolve_names
    from rag_eval.metrics.judges.config import LLMConfig
    from rag_eval.metrics.judges.probe import Expected

    limit = LLMConfig.from_env(max_row_requests=getattr(args, "max_row_requests", None)).max_row_requests
    if not limit:
        return None
    lines = 0
    for file in _files(args):
        with open(file, "rb") as stream:
            lines += sum(chunk.count(b"\n") for chunk in iter(lambda: stream.read(1 << 20), b"")) + 1
    most = lines * len(resolve_names(args.metrics, args.registry)) * limit
    return Expected(most, most)


def expected_answers(args: argparse.Namespace):
    """The answers ``rag-eval run`` (its dataset) or ``backfill`` (the versions under ``--datasets``
    between ``--from`` and ``--to``) would buy, as the dry run counts them
    (``rag_eval.metrics.judges.probe.Expected``).

    Raises
    ------
    ValueError, OSError
        For arguments or a dataset the command itself refuses (it says why).
    """
    from rag_eval.metrics.judges.probe import Expected
    from rag_eval.orchestration.settings import RunSettings

    total = estimated(RunSettings.from_args(args), args.registry, _files(args))[0].total
    return Expected(total["chat_requests"], total["embedding_requests"])


def dry_run(settings: RunSettings, args: argparse.Namespace) -> int:
    """Print what ``rag-eval run`` of ``args.dataset`` with ``settings`` would send, per metric and in
    total, after the judgement cache (read only: the cache file is neither created nor changed),
    and its price at ``--price`` (with a judge cascade: a full strong run's, then the cascade's
    expected share of it); and, when the real run would be refused before its first request
    (its cache cannot take writes or lacks room: ``rag_eval.orchestration.cache_cli.predicted_refusal``),
    that refusal's line."""
    from rag_eval.assets.registration import dataset_file
    from rag_eval.metrics.judges.llm import LLMJudge
    from rag_eval.metrics.judges.probe import Expected
    from rag_eval.orchestration.cache_cli import predicted_refusal

    price = parse_price(args.price)
    settings = priced_budget(settings, args)  # a cascade's sum, as rows
    full = replace(settings, judge=settings.strong_judge) if settings.strong_judge is not None else settings
    # the files `run` takes, and no other
    estimate, judge = estimated(full, args.registry, [dataset_file(Path(args.dataset))], True)
    if isinstance(judge, LLMJudge):
        judge.close()  # its own (not kept): its connections and its read-only cache
    where = f" at {judge.describe()['base_url'] or 'the OpenAI API'}" if isinstance(judge, LLMJudge) else ""
    print(f"dry run: {estimate.rows} rows of {args.dataset}, judge {judge.name}{where}; nothing is sent or registered"
          + (" (a judge cascade: a full strong run's requests, then the cascade's share)" if full is not settings
             else ""))
    print(f"{'metric':<32}{'chat':>8}{'embeddings':>12}{'prompt tokens':>16}{'completion tokens':>19}")
    for name, row in [*estimate.metrics.items(), ("total", estimate.total)]:
        print(f"{name:<32}{row['chat_requests']:>8,}{row['embedding_requests']:>12,}{row['prompt_tokens']:>16,}"
              f"{row['completion_tokens']:>19,}")
    print("(after the judgement cache; a request shared by two metrics counts once; tokens estimated at "
          "4 bytes of UTF-8 a token)")
    if price:
        print(f"cost: {estimate.cost(*price):.4f} at {price[0]:g} per million prompt and {price[1]:g} per million "
              "completion tokens")
    if full is not settings and settings.strong is not None:
        share = min(1.0, settings.strong.get("share", settings.strong.get("rows", 0) / max(estimate.rows, 1)))
        print(f"judge cascade: the strong judge judges about {share:.0%} of each metric's rows: about "
              f"{round(share * estimate.total['chat_requests']):,} chat and "
              f"{round(share * estimate.total['embedding_requests']):,} embedding requests"
              + (f", cost about {share * estimate.cost(*price):.4f}" if price else "")
              + f"; the cheap judge ({settings.judge.code_version()}) scores every row"
              + (", sending nothing" if settings.judge.offline else ""))
    if estimate.over_budget:
        print(f"{len(estimate.over_budget)} (row, metric) pair(s) over the per-row budget would be sent nothing "
              "(judge_error):")
        for item in estimate.over_budget[:5]:
            print(f"  row {item['row']} (id {item['sample_id']}): {item['reason']}")
    refused = predicted_refusal(args, Expected(estimate.total["chat_requests"], estimate.total["embedding_requests"]))
    if refused:
        print(f"the run would be refused before its first request: {refused}")
    return 0
