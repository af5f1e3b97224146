"""``rag-eval align VERSION``: the judge aligned to the version's faithfulness labels.

Reads the labels ``rag-eval annotate import`` stored with the version. The offline judge's verifier
is refitted with k-fold cross-fitting (``rag_eval.metrics.judges.align``); an LLM judge (configured
as for ``rag-eval run``) gets up to ``--examples`` labelled rows it got wrong in its statement
verification prompts, each row judged with examples from the other folds only
(``rag_eval.metrics.judges.align_llm``). It prints agreement with the labels and the
prediction-powered interval of the mean label, before against aligned, both on held-out folds, and
writes the variant (``--write``: weights or examples), named by its content (``aligned-<hash>``), that
``rag-eval run --verifier FILE`` uses; its results, code versions and cache keys carry that name,
and a run without ``--verifier`` is the default judge again.

Exit status: 0 aligned (written); 1 rows the LLM judge could not judge (what was judged is cached);
2 bad arguments, an unknown version, too few labels, an LLM judge that got no label wrong.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_align(args: argparse.Namespace) -> int:
    """Align the judge to ``args.version``'s labels; print the comparison; write the variant."""
    from rag_eval.assets.resources import DatasetStore
    from rag_eval.metrics.core.samples import load_samples
    from rag_eval.metrics.errors import SettingsError, command
    from rag_eval.metrics.judges.align import align
    from rag_eval.metrics.judges.align_llm import align_examples
    from rag_eval.metrics.judges.base import JudgeError
    from rag_eval.metrics.judges.examples import read_variant
    from rag_eval.metrics.judges.llm import LLMJudge
    from rag_eval.metrics.judges.offline import OfflineJudge
    from rag_eval.metrics.judges.verifier import Verifier
    from rag_eval.metrics.sources.labels import labels_frame
    from rag_eval.orchestration.settings import judge_resource

    store = DatasetStore(root=str(Path(args.datasets).resolve()))
    path = store.samples_path(args.version)
    if not path.exists():
        raise SettingsError(f"dataset version {args.version} is not registered under {args.datasets}/")
    samples = [s for s in load_samples(path) if "row" not in s.problems]
    frame, problems = labels_frame(path.parent, [(s.row, s.id) for s in samples], args.version)
    labels = {row.id: float(row.label) for row in frame.itertuples() if row.metric == "faithfulness"}
    for problem in problems[:3]:  # a file edited by hand: say which lines, not only how many
        print(f"refused: {problem}", file=sys.stderr)
    if not labels:
        raise SettingsError(f"dataset version {args.version} has no usable faithfulness labels" + (
            f" ({len(problems)} lines of its labels.jsonl refused, the first: {problems[0]})" if problems else
            f": label some rows with `{command(f'annotate export {args.version}')}` and `{command('annotate import')}`"))
    judge = judge_resource(args).get_judge()
    source = f"dataset version {args.version}"
    if isinstance(judge, LLMJudge):
        k = 4 if args.examples is None else args.examples
        try:
            result = align_examples(samples, labels, judge, k=k, folds=args.folds, source=source)
        except JudgeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        names, what = ("default", "aligned"), f"{judge.name} given up to {k} examples of its mistakes"
    elif args.examples is not None:
        raise SettingsError("--examples applies to an LLM judge (OPENAI_BASE_URL, OPENAI_API_KEY or --base-url); "
                            "the offline judge's verifier is refitted instead")
    else:
        result = align(samples, labels, folds=args.folds, source=source)
        names, what = ("shipped", "aligned"), "verifier aligned"
    unused = len(labels) - result.labelled
    print(f"{args.version}: {what} on {result.labelled} faithfulness labels ({len(problems)} refused"
          f"{f', {unused} on rows without a measured faithfulness not used' if unused else ''}), "
          f"{args.folds}-fold cross-fitted; every figure below is on rows the judge scoring them "
          "was not aligned on")
    print_comparison(result, names)
    kind = "weights" if names[0] == "shipped" else "examples"
    written = result.write(args.write or Path("verifiers") / f"aligned-{result.model['version']}.json")
    label = OfflineJudge.label_of(Verifier(written)) if kind == "weights" else judge.with_examples(read_variant(written)).name
    print(f"wrote {written} (judge {label}{f', {len(result.model[kind])} examples' if kind == 'examples' else ''}); "
          f"use it: {command(f'run ... --verifier {written}')}")
    return 0


def print_comparison(result, names: tuple[str, str]) -> None:
    """The agreement and PPI interval table of an ``Alignment``, ``names`` (before, after) on its rows,
    the interval's change, and a warning when the aligned judge ranks the labels worse."""
    print(f"{'':10}{'AUROC':>7}{'accuracy':>10}{'MAE':>7}   mean label, PPI 95 % interval (width)")
    for name, agreement, interval in ((names[0], result.before, result.interval_before),
                                      (names[1], result.after, result.interval_after)):
        auroc = "-" if agreement.auroc is None else f"{agreement.auroc:.3f}"
        low, high = (0.0, 0.0) if interval is None else (max(interval.ci_low, 0.0), min(interval.ci_high, 1.0))
        ppi = "-" if interval is None else f"{interval.estimate:.3f} [{low:.3f}, {high:.3f}] ({high - low:.3f})"
        print(f"{name:10}{auroc:>7}{agreement.accuracy:>10.3f}{agreement.mae:>7.3f}   {ppi}")
    if result.interval_before is None or result.interval_after is None:
        print("every scored row is labelled: the mean label is known, there is no interval to narrow")
    else:
        change = 1 - result.interval_after.se / result.interval_before.se
        moved = "unchanged" if round(change, 2) == 0 else f"{'narrower' if change > 0 else 'wider'} by {abs(change):.0%}"
        print(f"interval {moved} with the aligned judge "
              "(before cutting to [0, 1]) "
              f"({result.scored - result.labelled} unlabelled scored rows)")
    before, after = result.before, result.after
    ranked = (after.auroc, before.auroc) if None not in (after.auroc, before.auroc) else (after.accuracy, before.accuracy)
    if ranked[0] < ranked[1]:
        print(f"the aligned judge ranks these labels worse than the {names[0]} one ({'AUROC' if after.auroc is not None else 'accuracy'} "
              f"{ranked[0]:.3f} against {ranked[1]:.3f}, held out): keep the {names[0]} judge unless its scores' "
              "level (MAE) is what you need; more labels may change this")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``rag-eval align``."""
    from rag_eval.orchestration.parsing import add_judge_arguments

    parser.add_argument("version", help="a registered dataset version with faithfulness labels (rag-eval annotate)")
    parser.add_argument("--folds", type=int, default=5, help="cross-fitting folds (default 5)")
    parser.add_argument("--examples", type=int, metavar="K",
                        help="with an LLM judge: labelled rows it got wrong added to its prompts, at most (default 4)")
    parser.add_argument("--write", metavar="FILE",
                        help="where the variant goes: the aligned weights, or an LLM judge's examples "
                             "(default verifiers/aligned-<hash>.json)")
    parser.add_argument("--datasets", default="datasets", help="folder of dataset versions (default datasets/)")
    add_judge_arguments(parser)
    parser.set_defaults(handler=cmd_align, uses_instance=False, judges=True)
