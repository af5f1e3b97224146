"""What ``rag-eval``'s arguments mean: the run config, the judge and the resources they give."""
from __future__ import annotations

import argparse
from pathlib import Path
from pydantic import TypeAdapter, ValidationError


def run_config(args: argparse.Namespace) -> dict:
    """Run config: the summary's scale and each metric's options (``--threshold``, ``--metric-option``),
    each checked by building the metric (its ``Options`` model and its threshold range).

    Raises
    ------
    ValueError
        For an unknown metric or option, or a value of the wrong type or out of range.
    """
    from assets.evaluation import METRICS_OP
    from metrics.aggregate import is_ratio
    from metrics.judges.config import PER_METRIC, LLMConfig
    from metrics.registry import METRICS, option_types, resolve_names

    resolve_names(args.metrics)  # unknown names fail here, before anything is registered
    if not 0 <= args.max_rejected_share <= 1:
        raise ValueError(f"--max-rejected-share {args.max_rejected_share:g}: give a share between 0 and 1")
    ops: dict = {"eval_summary": {"config": {"scale": args.scale, "dingo_layout": args.dingo_summary}},
                 "ingest_dataset": {"config": {"max_rejected_share": args.max_rejected_share}}}
    items = [f"{t.partition('=')[0]}.threshold={t.partition('=')[2]}" for t in args.threshold or []]
    per_metric: dict[str, dict] = {}
    for item in items + (args.metric_option or []):
        target, _, value = item.partition("=")
        metric, _, option = target.partition(".")
        types = option_types(metric) if metric in METRICS else {}
        if option not in types or not value:
            known = f"OPTION one of {', '.join(types)}" if types else "METRIC a metric name (see --metrics)"
            raise ValueError(f"bad metric option {item!r}: use METRIC.OPTION=VALUE with {known}")
        try:
            converted = TypeAdapter(types[option]).validate_python(value)
        except ValidationError as exc:
            raise ValueError(f"bad metric option {item!r}: {exc.errors()[0]['msg']}") from None
        if option == "threshold":  # a [0, 1] metric's threshold is given on the table's scale (--scale)
            converted /= args.scale if is_ratio(metric) else 1
        per_metric.setdefault(metric, {})[option] = converted
    for metric, config in per_metric.items():
        try:  # the metric checks its own options and its threshold's range (per instance: label_max=10...)
            METRICS[metric](**{k: v for k, v in config.items() if k not in PER_METRIC})
        except ValueError as exc:
            scale = f" (at --scale {args.scale}, thresholds of [0, 1] metrics are given on the 0-{args.scale} " \
                    "scale)" if is_ratio(metric) and args.scale != 1 else ""
            raise ValueError(f"bad metric option for {metric}: {exc}{scale}") from None
    if per_metric:  # the metric assets are one op (assets.evaluation): one config per metric under it
        ops[METRICS_OP] = {"config": per_metric}
    judging = [o for o in PER_METRIC if getattr(args, o, None) is not None] + \
        [f"{m}.{o}" for m, options in per_metric.items() for o in options if o in PER_METRIC]
    if judging and not LLMConfig.from_env(base_url=args.base_url).configured:
        raise ValueError(f"{', '.join(judging)} apply to the LLM judge only: set OPENAI_BASE_URL or OPENAI_API_KEY, "
                         "or pass --base-url")
    return {"ops": ops, "loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def judge_resource(args: argparse.Namespace):
    """The ``judge`` resource of the judge options given (``--base-url``, ``--model``...;
    any field of ``JudgeResource`` the parser declares).

    Raises
    ------
    ValueError
        Naming the option, for a value outside its domain (``--strictness 0``, ``--temperature -1``).
    """
    from assets.resources import JudgeResource

    try:
        return JudgeResource(**{k: getattr(args, k) for k in JudgeResource.model_fields
                                if getattr(args, k, None) is not None})
    except ValidationError as exc:
        raise ValueError("; ".join(f"--{'.'.join(map(str, e['loc'])).replace('_', '-')} {e['input']!r}: {e['msg']}"
                                   for e in exc.errors())) from None


def resources(args: argparse.Namespace) -> dict:
    """The resources of a run (``assets.resources.build_resources``) at ``--datasets`` and ``--out``."""
    from assets.resources import ExecutionResource, build_resources

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    return build_resources(out, Path(args.datasets).resolve(), judge_resource(args),
                           ExecutionResource(executor=args.executor, master=args.spark_master,
                                             parallelism=args.parallelism))
