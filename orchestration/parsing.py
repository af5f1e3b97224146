"""What ``rag-eval``'s arguments mean: the judge and the resources they give (the run's settings:
``rag_eval.orchestration.settings.RunSettings``)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rag_eval.orchestration.settings import RunSettings


def named_file(value: str) -> str:
    """An option's file name, refused when empty (``--verifier ""`` or ``--cache-path ""`` would mean the
    default silently)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("an empty file name")
    return value


def add_judge_arguments(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The LLM judge's options (``--base-url``, ``--model``...; ``rag_eval.orchestration.settings.judge_resource``
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


def add_cascade_arguments(parser: argparse.ArgumentParser) -> None:
    """A judge cascade's options (``rag_eval.orchestration.settings.cascade_judges`` reads them), as a group of
    ``parser``."""
    cascade = parser.add_argument_group(
        "judge cascade (the cheap judge scores every row, the LLM judge a sample; the summary estimates the LLM "
        "judge's means with 95 % intervals: docs/explanation/cascade.md)")
    cascade.add_argument("--strong-budget", metavar="BUDGET",
                         help="the LLM judge's sample per metric: a share of the rows (0.1 or 10%%), a number of rows "
                              "(200), or a sum with its currency (5usd: rows bought at --price, as --dry-run counts)")
    cascade.add_argument("--strong-sampling", choices=("active", "uniform"),
                         help="active (default): rows the cheap judge is least sure of more likely; uniform")
    cascade.add_argument("--strong-seed", type=int, help="the draw's seed (default 0; a larger budget with the same "
                                                          "seed draws the smaller one's rows and more)")
    cascade.add_argument("--cheap-model", help="the cheap judge: this model on the LLM judge's endpoint (default the "
                                               "offline judge)")


def resources(settings: RunSettings, progress) -> dict:
    """The resources of a run (``rag_eval.assets.resources.build_resources``) at the settings' paths,
    with their judge, strong judge and executor; the execution resource tells ``progress`` (the command's
    ``rag_eval.orchestration.report.ProgressDisplay``: it draws while the command has it open)."""
    from rag_eval.assets.resources import ExecutionResource, build_resources

    out = Path(settings.paths.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    executor, datasets = settings.executor, settings.paths.datasets
    assert executor is not None and datasets is not None, "the settings of a command that scores versions"
    return build_resources(out, Path(datasets).resolve(), settings.judge,
                           ExecutionResource(executor=executor.kind, master=executor.master,
                                             parallelism=executor.parallelism, progress=progress),
                           settings.strong_judge)


def definitions(args: argparse.Namespace, settings: RunSettings):
    """The code location's definitions (``rag_eval.orchestration.location.build_definitions``: the
    one asset graph, the jobs) over the command's metric registry (``args.registry``) with the
    :func:`resources` of its ``settings``; built once per command (kept as ``args.definitions``, its
    progress display as ``args.progress``)."""
    if getattr(args, "definitions", None) is None:
        from rag_eval.orchestration.location import build_definitions
        from rag_eval.orchestration.report import ProgressDisplay

        args.progress = ProgressDisplay()
        args.definitions = build_definitions(args.registry, resources(settings, args.progress))
    return args.definitions
