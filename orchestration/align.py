"""``rag-eval align VERSION``: the offline verifier refitted on the version's faithfulness labels.

Reads the labels ``rag-eval annotate import`` stored with the version, refits the verifier with
k-fold cross-fitting (``rag_eval.metrics.judges.align``), prints agreement with the labels and the
prediction-powered interval of the mean label, shipped against aligned, both on held-out folds, and
writes the aligned weights (``--write``): a judge variant of its own name (``<rules>+aligned-<hash>``) that
``rag-eval run --verifier FILE`` uses; its results, code versions and cache keys carry that name,
and a run without ``--verifier`` is the shipped judge again.

Exit status: 0 aligned (written); 2 bad arguments, an unknown version, too few labels.
"""
from __future__ import annotations

import argparse
from pathlib import Path


def cmd_align(args: argparse.Namespace) -> int:
    """Align the verifier to ``args.version``'s labels; print the comparison; write the weights."""
    from rag_eval.assets.resources import DatasetStore
    from rag_eval.metrics.core.samples import load_samples
    from rag_eval.metrics.errors import SettingsError
    from rag_eval.metrics.judges.align import align
    from rag_eval.metrics.judges.offline import OfflineJudge
    from rag_eval.metrics.judges.verifier import Verifier
    from rag_eval.metrics.sources.labels import labels_frame

    store = DatasetStore(root=str(Path(args.datasets).resolve()))
    path = store.samples_path(args.version)
    if not path.exists():
        raise SettingsError(f"dataset version {args.version} is not registered under {args.datasets}/")
    samples = [s for s in load_samples(path) if "row" not in s.problems]
    frame, problems = labels_frame(path.parent, {s.row: s.id for s in samples}, args.version)
    labels = {row.id: float(row.label) for row in frame.itertuples() if row.metric == "faithfulness"}
    if not labels:
        raise SettingsError(f"dataset version {args.version} has no faithfulness labels: label some rows with "
                            f"`rag-eval annotate export {args.version}` and `rag-eval annotate import`")
    result = align(samples, labels, folds=args.folds, source=f"dataset version {args.version}")
    unused = len(labels) - result.labelled
    print(f"{args.version}: verifier aligned on {result.labelled} faithfulness labels ({len(problems)} refused"
          f"{f', {unused} on rows without a measured faithfulness not used' if unused else ''}), "
          f"{args.folds}-fold cross-fitted; every figure below is on rows the model scoring them was not fitted on")
    print(f"{'':10}{'AUROC':>7}{'accuracy':>10}{'MAE':>7}   mean label, PPI 95 % interval (width)")
    for name, agreement, interval in (("shipped", result.before, result.interval_before),
                                      ("aligned", result.after, result.interval_after)):
        auroc = "-" if agreement.auroc is None else f"{agreement.auroc:.3f}"
        low, high = (0.0, 0.0) if interval is None else (max(interval.ci_low, 0.0), min(interval.ci_high, 1.0))
        ppi = "-" if interval is None else f"{interval.estimate:.3f} [{low:.3f}, {high:.3f}] ({high - low:.3f})"
        print(f"{name:10}{auroc:>7}{agreement.accuracy:>10.3f}{agreement.mae:>7.3f}   {ppi}")
    if result.interval_before is None or result.interval_after is None:
        print("every scored row is labelled: the mean label is known, there is no interval to narrow")
    else:
        change = 1 - result.interval_after.se / result.interval_before.se
        print(f"interval {'narrower' if change > 0 else 'wider'} by {abs(change):.0%} with the aligned verifier "
              "(before cutting to [0, 1]) "
              f"({result.scored - result.labelled} unlabelled scored rows)")
    before, after = result.before, result.after
    ranked = (after.auroc, before.auroc) if None not in (after.auroc, before.auroc) else (after.accuracy, before.accuracy)
    if ranked[0] < ranked[1]:
        print(f"the aligned verifier ranks these labels worse than the shipped one ({'AUROC' if after.auroc is not None else 'accuracy'} "
              f"{ranked[0]:.3f} against {ranked[1]:.3f}, held out): keep the shipped verifier unless its scores' "
              "level (MAE) is what you need; more labels may change this")
    written = result.write(args.write or Path("verifiers") / f"aligned-{result.model['version']}.json")
    label = OfflineJudge.label_of(Verifier(written))
    print(f"wrote {written} (judge {label}); use it: rag-eval run ... --verifier {written}")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``rag-eval align``."""
    parser.add_argument("version", help="a registered dataset version with faithfulness labels (rag-eval annotate)")
    parser.add_argument("--folds", type=int, default=5, help="cross-fitting folds (default 5)")
    parser.add_argument("--write", metavar="FILE",
                        help="where the aligned weights go (default verifiers/aligned-<version>.json)")
    parser.add_argument("--datasets", default="datasets", help="folder of dataset versions (default datasets/)")
    parser.set_defaults(handler=cmd_align, uses_instance=False)
