"""What ``rag-eval``'s arguments mean: the run config, the judge and the resources they give."""
from __future__ import annotations

import argparse
from pathlib import Path
from pydantic import ValidationError


def named_file(value: str) -> str:
    """An option's file name, refused when empty (``--verifier ""`` or ``--cache-path ""`` would mean the
    default silently)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("an empty file name")
    return value


def add_judge_arguments(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The LLM judge's options (``--base-url``, ``--model``...; ``judge_resource``
    reads them), as a group of ``parser``; their defaults and choices are ``LLMConfig``'s."""
    from dataclasses import fields

    from rag_eval.metrics.judges.config import RESPONSE_FORMATS, LLMConfig

    default = {f.name: f.default for f in fields(LLMConfig)}
    judge = parser.add_argument_group("LLM judge (used when OPENAI_API_KEY or OPENAI_BASE_URL is set, or "
                                      "--base-url is given; API keys are read from the environment only)")
    judge.add_argument("--base-url", help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL)")
    judge.add_argument("--model", help=f"chat model (default $OPENAI_MODEL or {default['model']})")
    judge.add_argument("--embedding-model",
                       help=f"embedding model (default $EMBEDDING_MODEL or {default['embedding_model']})")
    judge.add_argument("--concurrency", type=int,
                       help=f"requests in flight at most (default {default['concurrency']})")
    judge.add_argument("--timeout", type=float, help=f"seconds per request (default {default['timeout']:g})")
    judge.add_argument("--strictness", type=int,
                       help=f"questions generated for answer_relevancy (default {default['strictness']})")
    judge.add_argument("--temperature", type=float, help=f"sampling temperature (default {default['temperature']:g})")
    judge.add_argument("--response-format", choices=RESPONSE_FORMATS,
                       help="json_object for endpoints without json_schema (DeepSeek, some vLLM builds)")
    judge.add_argument("--cache-path", type=named_file, help=f"judgement cache file (default {default['cache_path']}; "
                       "a symbolic link is followed, a folder refused)")
    judge.add_argument("--cache-across-endpoints", action="store_true", default=None,
                       help="reuse cached judgements of another endpoint serving the same model")
    judge.add_argument("--max-row-requests", type=int,
                       help=f"requests one row may send per metric, after the cache (default "
                            f"{default['max_row_requests']}; 0 no limit); a row over it is judge_error, nothing sent")
    judge.add_argument("--max-row-tokens", type=int, help="estimated tokens one row may send per metric "
                       f"(default {default['max_row_tokens']}; 0 no limit)")
    return judge


def run_config(args: argparse.Namespace) -> dict:
    """Run config: the summary's scale and each metric's options (``--threshold``, ``--metric-option``),
    each checked by building the metric (its ``Options`` model and its threshold range).

    Raises
    ------
    ValueError
        For an unknown metric or option, or a value of the wrong type or out of range;
        ``--executor spark`` without pyspark (``rag_eval.metrics.core.extras.MissingExtra``, naming the extra).
    """
    from rag_eval.metrics.errors import SettingsError
    from rag_eval.assets.evaluation import METRICS_OP
    from rag_eval.metrics.reports.aggregate import is_ratio
    from rag_eval.metrics.judges.config import PER_METRIC, LLMConfig
    from rag_eval.metrics.core.registry import option_types, option_value, resolve_names

    registry = args.registry  # the command's (rag_eval.orchestration.cli builds it once)
    resolve_names(args.metrics, registry)  # unknown names fail here, before anything is registered
    if getattr(args, "executor", "local") == "spark":
        from rag_eval.metrics.core.extras import require

        require("pyspark", "spark", "Spark execution")  # without it: the extra to install, before anything runs
    share = args.max_rejected_share
    if share is not None and not 0 <= share <= 1:
        raise SettingsError(f"--max-rejected-share {share:g}: give a share between 0 and 1")
    # `run` keeps the share with the version (rag_eval.assets.ingestion.rejection_limit); a backfill's is its runs'.
    ops: dict = {"eval_summary": {"config": {"scale": args.scale, "dingo_layout": args.dingo_summary}},
                 "ingest_dataset": {"config": {"max_rejected_share": share if args.command == "backfill" else None}}}
    items = [f"{t.partition('=')[0]}.threshold={t.partition('=')[2]}" for t in args.threshold or []]
    per_metric: dict[str, dict] = {}
    for item in items + (args.metric_option or []):
        target, _, value = item.partition("=")
        metric, _, option = target.partition(".")
        types = option_types(metric, registry) if metric in registry else {}
        if option not in types or not value:
            known = f"OPTION one of {', '.join(types)}" if types else "METRIC a metric name (see --metrics)"
            raise SettingsError(f"bad metric option {item!r}: use METRIC.OPTION=VALUE with {known}")
        try:
            converted = option_value(metric, option, value, registry)
        except ValueError as exc:
            raise SettingsError(f"bad metric option {item!r}: {exc}") from None
        if option == "threshold":  # a [0, 1] metric's threshold is given on the table's scale (--scale)
            converted /= args.scale if is_ratio(metric, registry) else 1
        per_metric.setdefault(metric, {})[option] = converted
    for metric, config in per_metric.items():
        try:  # the metric checks its own options and its threshold's range (per instance: label_max=10...)
            registry[metric](**{k: v for k, v in config.items() if k not in PER_METRIC})
        except ValueError as exc:
            scale = f" (at --scale {args.scale}, thresholds of [0, 1] metrics are given on the 0-{args.scale} " \
                    "scale)" if is_ratio(metric, registry) and args.scale != 1 else ""
            raise SettingsError(f"bad metric option for {metric}: {exc}{scale}") from None
    if per_metric:  # the metric assets are one op (rag_eval.assets.evaluation): one config per metric under it
        ops[METRICS_OP] = {"config": per_metric}
    judging = [o for o in PER_METRIC if getattr(args, o, None) is not None] + \
        [f"{m}.{o}" for m, options in per_metric.items() for o in options if o in PER_METRIC]
    if judging and not LLMConfig.from_env(base_url=args.base_url).configured:
        raise SettingsError(f"{', '.join(judging)} apply to the LLM judge only: set OPENAI_BASE_URL or OPENAI_API_KEY, "
                            "or pass --base-url")
    return {"ops": ops, "loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def judge_resource(args: argparse.Namespace):
    """The ``judge`` resource of the judge options given (``--base-url``, ``--model``...;
    any field of ``JudgeResource`` the parser declares), built once per command: the command's
    checks and its runs share its judges (``JudgeResource.built_judges``).

    Raises
    ------
    ValueError
        Naming the option, for a value outside its domain (``--strictness 0``, ``--temperature -1``).
    """
    from rag_eval.metrics.errors import SettingsError
    from rag_eval.assets.resources import JudgeResource

    if getattr(args, "judge_resource", None) is not None:
        return args.judge_resource
    try:
        args.judge_resource = JudgeResource(**{k: getattr(args, k) for k in JudgeResource.model_fields
                                               if getattr(args, k, None) is not None})
        return args.judge_resource
    except ValidationError as exc:
        raise SettingsError("; ".join(f"--{'.'.join(map(str, e['loc'])).replace('_', '-')} {e['input']!r}: {e['msg']}"
                                   for e in exc.errors())) from None


def resources(args: argparse.Namespace) -> dict:
    """The resources of a run (``rag_eval.assets.resources.build_resources``) at ``--datasets`` and ``--out``;
    the execution resource tells the command's progress display, ``args.progress``
    (``rag_eval.orchestration.report.ProgressDisplay``: it draws while the command has it open)."""
    from rag_eval.assets.resources import ExecutionResource, build_resources
    from rag_eval.orchestration.report import ProgressDisplay

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    args.progress = ProgressDisplay()
    return build_resources(out, Path(args.datasets).resolve(), judge_resource(args),
                           ExecutionResource(executor=args.executor, master=args.spark_master,
                                             parallelism=args.parallelism, progress=args.progress))


def definitions(args: argparse.Namespace):
    """The code location's definitions (``rag_eval.orchestration.location.build_definitions``: the
    one asset graph, the jobs) over the command's metric registry (``args.registry``) with its
    :func:`resources`; built once per command."""
    if getattr(args, "definitions", None) is None:
        from rag_eval.orchestration.location import build_definitions

        args.definitions = build_definitions(args.registry, resources(args))
    return args.definitions
