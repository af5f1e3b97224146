"""Trust bench: does the prediction-powered interval (``rag_eval.metrics.stats.ppi``) cover the truth, and how
much narrower is it than the interval from the human labels alone?

A known truth needs an estimand known exactly, so every draw builds a *version*: ``N`` rows
drawn i.i.d. from a finite **pool** of (human label, judge score) rows with known
probabilities; the truth is the pool's expected label, not any sample's mean (a finite set
labelled without replacement and compared with its own mean would over-cover by the
finite-population correction). ``n`` of the ``N`` rows get their human label (the first
``n``: the rows are i.i.d., so these are a uniformly random sample); the judge's scores of
the other ``N - n`` are the unlabelled part. Each gives three 95 % intervals of
``rag_eval.metrics.stats.ppi``: ``ppi_mean`` as the product computes it (PPI++, power-tuned, with the
Agresti-Coull pseudo-rows), plain PPI++ (``pseudo=0``: ppi-python's interval, shown for
comparison) and ``classical_mean`` (the ``n`` labels alone: Agresti-Coull). Per (set, judge,
n), over ``--draws`` versions (default 2,000; Monte-Carlo standard error of a 95 % coverage
≈ 0.5 %): the share of intervals holding the truth, the mean widths and their ratio (mean
PPI width / mean classical width; plain PPI++'s too), the mean ``lam``, and the raw judge
mean's bias (its expectation minus the truth, exact from the pool). ``N`` = 2,000 rows
(``--rows``); n = 25, 50, 100, 200.

Sets (under ``--data``):

* ``halueval_qa``: every row gives a right answer (label 1) and a hallucinated one (label 0)
  over ``contexts=[knowledge]``. A version's row is a pool question drawn uniformly, then its
  right answer with probability ``p``, else its hallucinated one: the truth is ``p``
  (0.7 and 0.4). Pools, reported apart because the width ratio depends on the judge's
  quality and the offline judge's rules were tuned on some rows: *tuned* (rows 0-99 and
  300-399) and *held-out* (400-499, never used to set a rule). The held-out pool is the
  one to quote.
* ``ragas_annotated``: a person's accept/reject of an LLM judge's binary verdict per row;
  the human label is the verdict if accepted, else its opposite (as ``calibrate_judges.py``
  reads it). Per metric, the 18-21 rows are the pool, each drawn with probability 1/m, so
  the truth is the pool's share of label 1. Drawing with replacement allows any n, but the
  population is these few rows: it shows the interval under this judge's agreement
  pattern, not on new rows. Judges: the recorded LLM verdict, and the offline judge with
  the metric ``calibrate_judges.py`` maps it to (answer_correctness; helpfulness as
  answer_relevancy; summary_accuracy as faithfulness to the user input).

Judges: the offline judge (``OfflineJudge``: faithfulness on HaluEval, in [0, 1]) and two
deliberately biased ones built from each set's first judge: *squashed* (``0.5 + 0.5 f``,
toward "faithful") and *lenient* (a label-0 row is scored 1.0 with probability 0.3, drawn
per version row, else as before: it accepts 30 % of what people reject). A row the judge
cannot score (``not_applicable``) is scored 0.5: any fixed fill keeps the interval valid. On
HaluEval, *aligned*: the offline judge aligned on each version's own ``n`` labels as ``rag-eval
align`` does it (``rag_eval.metrics.judges.fitting.cross_fit``: the shipped verifier's logit
rescaled by five-fold cross-fitting, a labelled row scored by the model fitted without its fold, the
others by the fold models' mean), to show by how much aligning narrows the interval and that it
stays valid.

The offline judge's scores are computed once per answer and kept in ``--cache`` (default
``<tmp>/rag-eval-trust-bench``) under a key of the judge's rules, the ``metrics`` package's
code and the data files, so the draws are pure numpy and a changed judge is scored again.

``--pseudo K`` gives the PPI interval pseudo-rows of weight ``K`` instead of the product's
(``rag_eval.metrics.stats.ppi``; the labels-only interval stays Agresti-Coull): how an alternative weight
would fare. ``--sweep`` measures instead a binary judge with one-sided errors (it accepts a
share ``e`` of the rows, all of which people reject; truth 0.72) for ``e`` from 0 to 0.13: the
trade-off the pseudo-rows' weight sets between a near-perfect judge's over-coverage and a
judge whose errors the labels happen not to show (``rag_eval.metrics.stats.ppi``'s docstring).

Run from the repo root::

    .venv/bin/python bench/trust_bench.py --data DIR [--draws 2000] [--aligned-draws 500] [--rows 2000] [--json out.json]
    .venv/bin/python bench/trust_bench.py --sweep [--pseudo 0.5]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from calibrate_judges import RAGAS_FILES, ragas_labels  # noqa: E402

from rag_eval.metrics import OfflineJudge, build_metrics, load_samples  # noqa: E402
from rag_eval.metrics.judges.fitting import Groups, cross_fit, fold_positions  # noqa: E402
from rag_eval.metrics.judges.verifier import Verifier  # noqa: E402
from rag_eval.metrics.stats.ppi import classical_mean, ppi_mean  # noqa: E402
from rag_eval.metrics.core.scoring import score_all  # noqa: E402

NS = (25, 50, 100, 200)
PROPORTIONS = (0.7, 0.4)
HALUEVAL_POOLS = {"tuned 0-99,300-399": lambda i: i < 400, "held-out 400-499": lambda i: i >= 400}
UNSCORED = 0.5
LENIENT_SHARE = 0.3
SWEEP_ERRORS = (0.0, 0.01, 0.02, 0.03, 0.05, 0.07, 0.083, 0.1, 0.13)
SWEEP_TRUTH = 0.72


@dataclass(frozen=True)
class Pool:
    """A population of rows: human labels ``y``, judge scores ``f`` and each row's draw
    probability ``w`` (arrays of one length, ``w`` summing to 1)."""

    y: np.ndarray
    f: np.ndarray
    w: np.ndarray

    @property
    def truth(self) -> float:
        """The expected human label of a drawn row: the estimand."""
        return float(self.w @ self.y)

    @property
    def judge_bias(self) -> float:
        """The raw judge mean's expectation minus the truth."""
        return float(self.w @ self.f) - self.truth


@dataclass(frozen=True)
class AlignedPool(Pool):
    """The offline judge aligned on each version's own ``n`` labels as ``rag-eval align`` does it
    (``fitting.cross_fit``: Platt rescaling of the shipped verifier by k-fold cross-fitting, a labelled row
    scored out of fold, the others by the fold models' mean): ``groups`` are the pool rows' statements
    (their targets the labels), ``f`` the shipped judge's scores (the bias shown is the shipped judge's)."""

    groups: Groups
    prior: Verifier
    folds: int = 5

    def rescore(self, index: np.ndarray, n: int, seed: int) -> np.ndarray:
        """The version's scores: its first ``n`` rows (pool ``index``) labelled and aligned on."""
        positions = fold_positions(n, self.folds, seed)
        scores, models = cross_fit(self.groups, [index[p] for p in positions], self.prior)
        labelled = np.empty(n)
        for p, held_out in zip(positions, scores):
            labelled[p] = held_out
        everywhere = np.mean([self.groups.means(bias, w) for bias, w in models], axis=0)
        return np.r_[labelled, everywhere[index[n:]]]


def mixture(right: np.ndarray, hallucinated: np.ndarray, p: float) -> Pool:
    """A question drawn uniformly, its right answer (label 1, score ``right[i]``) with
    probability ``p``, else its hallucinated one (label 0, ``hallucinated[i]``)."""
    m = len(right)
    return Pool(np.r_[np.ones(m), np.zeros(m)], np.r_[right, hallucinated], np.r_[np.full(m, p / m), np.full(m, (1 - p) / m)])


def uniform(labels: np.ndarray, scores: np.ndarray) -> Pool:
    """Every row drawn with probability 1/m."""
    return Pool(np.asarray(labels, float), np.asarray(scores, float), np.full(len(labels), 1.0 / len(labels)))


def squashed(pool: Pool) -> Pool:
    """The judge pushed toward "faithful": ``0.5 + 0.5 f``."""
    return Pool(pool.y, 0.5 + 0.5 * pool.f, pool.w)


def lenient(pool: Pool, share: float = LENIENT_SHARE) -> Pool:
    """A label-0 row is scored 1.0 with probability ``share`` (independently per drawn row),
    else as before: each label-0 row splits into a (0, 1.0) row of weight ``share * w`` and
    its own row of weight ``(1 - share) * w``."""
    rejected = pool.y == 0
    w = np.where(rejected, (1 - share) * pool.w, pool.w)
    return Pool(np.r_[pool.y, pool.y[rejected]], np.r_[pool.f, np.ones(rejected.sum())],
                np.r_[w, share * pool.w[rejected]])


def one_sided(e: float, truth: float = SWEEP_TRUTH) -> Pool:
    """A binary judge that agrees with people except on a share ``e`` of the rows, which
    people reject and it accepts."""
    return Pool(np.array([1.0, 0.0, 0.0]), np.array([1.0, 0.0, 1.0]), np.array([truth, 1.0 - truth - e, e]))


def simulate(pool: Pool, ns=NS, rows: int = 2000, draws: int = 2000, seed: int = 0,
             pseudo: float | None = None) -> dict[int, dict]:
    """Coverage and widths of the 95 % intervals of ``rag_eval.metrics.stats.ppi`` over ``draws`` versions of
    ``rows`` rows drawn from ``pool``, the first ``n`` labelled (see the module docstring):
    ``ppi_mean`` as the product computes it (or with pseudo-rows of weight ``pseudo``), plain
    PPI++ (``pseudo=0``, ppi-python's interval) and ``classical_mean`` (the labels alone).

    Returns per n: ``coverage`` and ``coverage_se`` (Monte-Carlo standard error) of the
    product's PPI interval, ``plain_coverage``, ``classical_coverage``, mean widths
    ``ppi_width`` and ``classical_width``, ``width_ratio`` (their ratio), ``plain_ratio``
    (plain PPI++'s mean width / the classical one), ``lam`` (mean power-tuning parameter).
    """
    if max(ns) >= rows:
        raise ValueError(f"n ({max(ns)}) must be below the version's rows ({rows})")
    rng = np.random.default_rng(seed)
    truth = pool.truth
    hits = {n: np.zeros((draws, 3), bool) for n in ns}
    widths = {n: np.zeros((draws, 3)) for n in ns}
    lams = {n: np.zeros(draws) for n in ns}
    for d in range(draws):
        index = rng.choice(len(pool.w), size=rows, p=pool.w)
        y, f = pool.y[index], pool.f[index]
        for n in ns:
            if isinstance(pool, AlignedPool):
                f = pool.rescore(index, n, seed + d)
            ppi = ppi_mean(y[:n], f[:n], f[n:], pseudo=pseudo)
            estimates = (ppi, ppi_mean(y[:n], f[:n], f[n:], pseudo=0.0), classical_mean(y[:n]))
            for k, est in enumerate(estimates):
                hits[n][d, k] = est.ci_low <= truth <= est.ci_high
                widths[n][d, k] = est.ci_high - est.ci_low
            lams[n][d] = ppi.lam
    out = {}
    for n in ns:
        coverage, plain, classical = hits[n].mean(axis=0)
        ppi_width, plain_width, classical_width = widths[n].mean(axis=0)
        out[n] = {"coverage": float(coverage), "coverage_se": float(np.sqrt(coverage * (1 - coverage) / draws)),
                  "plain_coverage": float(plain), "classical_coverage": float(classical),
                  "ppi_width": float(ppi_width), "classical_width": float(classical_width),
                  "width_ratio": float(ppi_width / classical_width),
                  "plain_ratio": float(plain_width / classical_width), "lam": float(lams[n].mean())}
    return out


def _halueval(data: Path) -> list[dict]:
    return [json.loads(line) for path in sorted((data / "halueval_qa").glob("*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def fingerprint(judge: OfflineJudge, files: list[Path]) -> str:
    """A key that changes with the judge's rules, the ``metrics`` code or the data."""
    digest = hashlib.sha256(json.dumps(judge.describe(), sort_keys=True, default=str).encode())
    for path in sorted((REPO / "metrics").rglob("*.py")) + sorted(files):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def offline_scores(data: Path, cache: Path) -> dict:
    """The offline judge's score of every answer of both sets, from the cache when there:
    ``scores``: ``halueval-qa-NNN/right`` and ``/hallucinated`` (faithfulness), ``ragas/<metric>/<i>``
    (``not_applicable`` is -1); ``statements``: per HaluEval answer, its statements' verifier features
    (``None`` where the rules decided alone) and the sum of those rules' verdicts, what aligning refits."""
    judge = OfflineJudge()
    files = sorted((data / "halueval_qa").glob("*.jsonl")) + [data / "ragas_annotated" / f for f in RAGAS_FILES]
    path = cache / f"offline-statements-{fingerprint(judge, files)}.json"
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    start = time.perf_counter()
    answers = {f"{r['id']}/{kind}": {"id": f"{r['id']}-{kind}", "user_input": r["question"], "response": r[field],
                                     "retrieved_contexts": [r["knowledge"]]}
               for r in _halueval(data) for kind, field in (("right", "right_answer"), ("hallucinated", "hallucinated_answer"))}
    results = score_all(load_samples(list(answers.values())), build_metrics(["faithfulness"]), judge)
    scores = {key: -1.0 if r.value is None else r.value for key, r in zip(answers, results)}
    statements = {key: [[item.get("features") for item in r.details["statements"]],
                        sum(item["verdict"] for item in r.details["statements"] if "features" not in item)]
                  for key, r in zip(answers, results) if r.value is not None}
    for metric, records in _ragas_by_metric(data).items():
        samples = load_samples([r["sample"] for r in records])
        values = [r.value for r in score_all(samples, build_metrics([metric]), judge)]
        scores.update({f"ragas/{metric}/{i}": -1.0 if v is None else v for i, v in enumerate(values)})
    cache.mkdir(parents=True, exist_ok=True)
    out = {"scores": scores, "statements": statements}
    path.write_text(json.dumps(out), encoding="utf-8")
    print(f"offline judge: {len(scores)} answers scored in {time.perf_counter() - start:.0f} s, kept in {path}")
    return out


def aligned(base: Pool, keys: list[str], statements: dict) -> AlignedPool:
    """``base`` (a :func:`mixture` of the answers ``keys``) under the offline judge aligned per version;
    an answer the judge cannot score stays at ``UNSCORED`` (one fixed statement of that verdict)."""
    judged = [statements[k][0] if k in statements else [None] for k in keys]
    fixed = [statements[k][1] if k in statements else UNSCORED for k in keys]
    return AlignedPool(base.y, base.f, base.w, Groups.of(judged, fixed, base.y), Verifier())


def _ragas_by_metric(data: Path) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for record in ragas_labels(data / "ragas_annotated"):
        grouped.setdefault(record["metric"], []).append(record)
    return grouped


def _filled(values) -> np.ndarray:
    """Scores with ``not_applicable`` (stored as -1) filled with ``UNSCORED``."""
    array = np.asarray(values, float)
    return np.where(array < 0, UNSCORED, array)


def pools(data: Path, offline: dict) -> list[tuple[str, str, str, Pool]]:
    """(set, pool, judge, Pool) of every configuration the bench measures."""
    out, scores = [], offline["scores"]
    ids = [r["id"] for r in _halueval(data)]
    for name, keep in HALUEVAL_POOLS.items():
        chosen = [i for i in ids if keep(int(i.rsplit("-", 1)[1]))]
        right = _filled([scores[f"{i}/right"] for i in chosen])
        hallucinated = _filled([scores[f"{i}/hallucinated"] for i in chosen])
        for p in PROPORTIONS:
            base = mixture(right, hallucinated, p)
            keys = [f"{i}/right" for i in chosen] + [f"{i}/hallucinated" for i in chosen]
            for judge, pool in (("offline", base), ("offline squashed", squashed(base)),
                                ("offline lenient", lenient(base)),
                                ("offline aligned", aligned(base, keys, offline["statements"]))):
                out.append(("HaluEval QA", f"{name} ({len(chosen)}), p={p}", judge, pool))
    for metric, records in _ragas_by_metric(data).items():
        labels = np.array([float(r["label"]) for r in records])
        verdicts = uniform(labels, [r["verdict"] for r in records])
        offline = uniform(labels, _filled([scores[f"ragas/{metric}/{i}"] for i in range(len(records))]))
        for judge, pool in (("LLM verdict", verdicts), ("LLM squashed", squashed(verdicts)),
                            ("LLM lenient", lenient(verdicts)), (f"offline {metric}", offline)):
            out.append(("RAGAS annotated", f"{records[0]['ragas_metric']} ({len(records)})", judge, pool))
    return out


def print_summary(results: list[dict]) -> None:
    """One line per (set, pool, judge): the judge's bias, then per n the PPI coverage (%) and
    the width ratio (the README's table)."""
    ns = sorted({r["n"] for r in results})
    print("\n| set, pool | judge | judge bias | " + " | ".join(f"n = {n}" for n in ns) + " |")
    print("|---|---|---|" + "---|" * len(ns))
    lines: dict[tuple, dict[int, dict]] = {}
    for r in results:
        lines.setdefault((r["set"], r["pool"], r["judge"]), {})[r["n"]] = r
    for (dataset, pool, judge), by_n in lines.items():
        first = next(iter(by_n.values()))
        cells = " | ".join(f"{100 * by_n[n]['coverage']:.1f} · {by_n[n]['width_ratio']:.2f}" for n in ns)
        print(f"| {dataset} {pool} | {judge} | {first['judge_bias']:+.3f} | {cells} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="folder holding halueval_qa/ and ragas_annotated/")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "rag-eval-trust-bench",
                        help="folder for the offline judge's scores")
    parser.add_argument("--draws", type=int, default=2000, help="versions drawn per set, judge and n")
    parser.add_argument("--rows", type=int, default=2000, help="rows of each version (N)")
    parser.add_argument("--aligned-draws", type=int, default=500,
                        help="versions drawn per n for the aligned judge (five fits a version and n: slower)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument("--pseudo", type=float, help="weight of the PPI interval's pseudo-rows (default: the product's)")
    parser.add_argument("--sweep", action="store_true", help="a binary judge with one-sided errors at rates 0-0.13")
    args = parser.parse_args()
    if args.sweep:
        configurations = [("binary judge", f"truth {SWEEP_TRUTH}", f"one-sided errors e={e}", one_sided(e))
                          for e in SWEEP_ERRORS]
    elif args.data is None:
        parser.error("--data is required (or --sweep)")
    else:
        configurations = pools(args.data, offline_scores(args.data, args.cache))
    weight = "the product's (rag_eval.metrics.stats.ppi)" if args.pseudo is None else args.pseudo
    print(f"PPI pseudo-rows of weight {weight}; ", end="")
    print(f"N = {args.rows} rows per version, {args.draws} versions per line ({args.aligned_draws} for the aligned judge); coverage ± its Monte-Carlo standard "
          f"error; widths are means; ratio = PPI width / classical width\n")
    print("| set | pool | judge | truth | judge bias | n | PPI coverage | plain PPI++ | classical | PPI width "
          "| classical width | ratio | plain ratio | lam |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    results, start = [], time.perf_counter()
    for k, (dataset, pool_name, judge, pool) in enumerate(configurations):
        draws = args.aligned_draws if isinstance(pool, AlignedPool) else args.draws
        for n, r in simulate(pool, rows=args.rows, draws=draws, seed=args.seed + k, pseudo=args.pseudo).items():
            results.append({"set": dataset, "pool": pool_name, "judge": judge, "truth": pool.truth,
                            "judge_bias": pool.judge_bias, "n": n, **r})
            print(f"| {dataset} | {pool_name} | {judge} | {pool.truth:.3f} | {pool.judge_bias:+.3f} | {n} "
                  f"| {100 * r['coverage']:.1f} ± {100 * r['coverage_se']:.1f} % | {100 * r['plain_coverage']:.1f} % "
                  f"| {100 * r['classical_coverage']:.1f} % "
                  f"| {r['ppi_width']:.3f} | {r['classical_width']:.3f} | {r['width_ratio']:.2f} | {r['plain_ratio']:.2f} "
                  f"| {r['lam']:.2f} |",
                  flush=True)
    print_summary(results)
    coverages = [r["coverage"] for r in results]
    print(f"\n{len(results)} lines in {time.perf_counter() - start:.0f} s. PPI coverage from {100 * min(coverages):.1f} "
          f"to {100 * max(coverages):.1f} % (bound 93-97 %: "
          f"{'holds' if 0.93 <= min(coverages) and max(coverages) <= 0.97 else 'FAILS'}: "
          f"{sum(c < 0.93 for c in coverages)} below, {sum(c > 0.97 for c in coverages)} above)")
    for r in results:
        if r["set"] == "HaluEval QA" and r["judge"] == "offline" and r["n"] == 100:
            print(f"offline judge, HaluEval {r['pool']}, n=100: interval {100 * (1 - r['width_ratio']):.0f} % narrower "
                  f"than the labels alone (bound >= 25 %: {'holds' if r['width_ratio'] <= 0.75 else 'FAILS'})")
    shipped = {(r["pool"], r["n"]): r for r in results if r["judge"] == "offline"}
    for r in results:
        if r["judge"] == "offline aligned":
            before = shipped[(r["pool"], r["n"])]
            print(f"aligned on the version's own labels, HaluEval {r['pool']}, n={r['n']}: PPI width {r['ppi_width']:.3f} "
                  f"against the shipped judge's {before['ppi_width']:.3f} "
                  f"({100 * (1 - r['ppi_width'] / before['ppi_width']):+.1f} % narrower), coverage "
                  f"{100 * r['coverage']:.1f} %")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
