"""Train the offline judge's verifier (``metrics/judges/verifier.json``) from data whose licence allows it.

Training statements, each judged against its contexts by the offline judge's features
(``OfflineJudge.support_features``), labelled 1 (supported) or 0:

* **HaluEval QA, tuning rows only** (MIT; rows 0-99 and 300-399 of ``halueval_qa/``; rows 400-499 are
  held out for ``bench/offline_judge_accuracy.py`` and never read here): every statement of
  ``right_answer`` is 1, every statement of ``hallucinated_answer`` 0, contexts = [knowledge].
* **Synthetic pairs from those rows' knowledge passages**, with three other rows' passages beside the
  right one as retrieved contexts (support spread over a longer context list, as in a real retrieval).
  Supported: a sentence copied, two sentences of the passage joined into one, a sentence's clauses
  reordered or its last clause dropped. Unsupported: a number changed, a name replaced by a name from
  another passage, a negation added to a verb, a sentence of a passage that was not retrieved, and a
  copied sentence joined with such a sentence (half supported is not supported).
* **tonic_validate's retriever sweep, questions at positions 0, 4 and 8** (MIT; ``tonic_sweep_tuning/``;
  positions 2 and 6 are held out for ``bench/long_answers_bench.py``): real chat-model answers over
  essays, each answer a group of its statements whose mean probability is fitted to GPT-4's
  ``answer_consistency`` (the share of its statements GPT-4 finds in the contexts).

The model is a logistic regression over ``verifier.FEATURES`` with an L2 penalty, fitted by L-BFGS-B with
each weight's sign bound (support evidence >= 0, missing evidence <= 0) and the sources weighted by
:data:`SOURCES`; a group's loss is the cross-entropy of its mean probability against its target.
The rule of a supported verdict (a threshold, and another for statements of more than so many words)
is then chosen on the three sources together (:func:`verdict_rule`). It prints five-fold cross-validated accuracy and cross-entropy on the training groups (never a held-out
figure: that is the benches') and writes the weights with what they were trained on.

Run from the repo root (``--data``: the folder holding ``halueval_qa/`` and ``tonic_sweep_tuning/``;
seeded, so re-running gives the same file)::

    .venv/bin/python tools/train_verifier.py --data DATA [--version N] [--out metrics/judges/verifier.json]
"""
from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rag_eval.metrics import OfflineJudge
from rag_eval.metrics.judges.fitting import Groups, fit
from rag_eval.metrics.stats.agreement import auroc
from rag_eval.metrics.judges.verifier import FEATURES, WEIGHTS
from rag_eval.metrics.text import names, split_sentences
from rag_eval.metrics.text import statements as split_statements

#: Weight of each source's groups in the fit, chosen on the tuning parts (docs/judges.md): HaluEval
#: answers, synthetic statements, sweep answers. More synthetic weight lowered the sweep's ranking.
SOURCES = {0: 1.0, 1: 0.1, 2: 1.0}
_NEGATABLE = re.compile(r"\b(is|was|are|were|has|had|can|will)\b")


def tuning_rows(data: Path) -> list[dict]:
    """HaluEval QA rows 0-99 and 300-399 (the tuning part; rows 400-499 are not read)."""
    rows = [json.loads(line) for path in sorted((data / "halueval_qa").glob("halueval_qa_rows_*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if int(r["id"].rsplit("-", 1)[1]) < 400]


def sweep_rows(data: Path) -> list[dict]:
    """The tonic_validate sweep's answers at question positions 0, 4 and 8 (its tuning part; 2 and 6
    are held out for ``bench/long_answers_bench.py`` and never read here)."""
    rows = [json.loads(line) for line in (data / "tonic_sweep_tuning" / "samples.jsonl").read_text().splitlines()
            if line.strip()]
    return [r for r in rows if r["question_index"] in (0, 4, 8)]


def changed_number(sentence: str, rng: random.Random) -> str | None:
    """``sentence`` with one of its numbers changed (a year moved, a count scaled), or ``None``."""
    found = list(re.finditer(r"\d+", sentence))
    if not found:
        return None
    match = rng.choice(found)
    value = int(match.group())
    new = value + rng.choice((1, 2, 3, 10)) if value > 31 else value * rng.choice((2, 3)) + 1
    return sentence[:match.start()] + str(new) + sentence[match.end():]


def synthetic(rows: list[dict], rng: random.Random) -> Iterator[tuple[str, str, list[str], int, str]]:
    """(question, statement, contexts, label, kind) made from the rows' knowledge (module docstring)."""
    for i, row in enumerate(rows):
        others = rng.sample([r for j, r in enumerate(rows) if j != i], 4)
        contexts = [row["knowledge"], *(o["knowledge"] for o in others[:3])]
        rng.shuffle(contexts)
        sentences = [s for s in split_sentences(row["knowledge"]) if len(s.split()) >= 4]
        if not sentences:
            continue
        outside = split_sentences(others[3]["knowledge"])
        first = rng.choice(sentences)
        made = [(first, 1, "copied")]
        if len(sentences) > 1:
            a, b = rng.sample(sentences, 2)
            made.append((f"{a.rstrip('.')}, and {b[0].lower()}{b[1:]}", 1, "joined"))
        if ", " in first:
            head, tail = first.rstrip(".").split(", ", 1)
            made.append((f"{tail[0].upper()}{tail[1:]}, {head[0].lower()}{head[1:]}.", 1, "reordered"))
            made.append((f"{head}.", 1, "clause dropped"))
        if changed := changed_number(first, rng):
            made.append((changed, 0, "number changed"))
        own, foreign = sorted(names(first)), sorted(names(others[3]["knowledge"]) - names(row["knowledge"]))
        if own and foreign:
            name = rng.choice(own)
            swapped = re.sub(re.escape(name), rng.choice(foreign).title(), first, count=1, flags=re.IGNORECASE)
            made.append((swapped, 0, "name replaced"))
        if _NEGATABLE.search(first):
            made.append((_NEGATABLE.sub(r"\1 not", first, count=1), 0, "negated"))
        if outside:
            stranger = rng.choice(outside)
            made.append((stranger, 0, "not retrieved"))
            made.append((f"{first.rstrip('.')}, and {stranger[0].lower()}{stranger[1:]}", 0, "half supported"))
        yield from ((row["question"], s, contexts, label, kind) for s, label, kind in made)


@dataclass
class Examples:
    """Training groups (``rag_eval.metrics.judges.fitting.Groups``): a HaluEval or synthetic statement
    is a group of one; a sweep answer is a group of its statements, its target GPT-4's
    answer_consistency. Each source's groups weigh :data:`SOURCES` in sum; ``words`` is each
    statement's word count (``support_words``), in the order of the groups' statements."""

    judged: list[list[dict[str, float] | None]] = field(default_factory=list)
    target: list[float] = field(default_factory=list)
    source: list[int] = field(default_factory=list)
    words: list[int] = field(default_factory=list)

    def add(self, judged: list[dict[str, float] | None], words: list[int | None], target: float, source: int,
            each: bool) -> None:
        """The statements ``judged`` (``support_features``, of ``words`` words) as one group, or one group each."""
        rows = [(values, n) for values, n in zip(judged, words) if values is not None]
        for chunk in ([[r] for r in rows] if each else [rows] if rows else []):
            self.judged.append([values for values, _ in chunk]), self.target.append(target)
            self.source.append(source), self.words.extend(int(n) for _, n in chunk)

    def groups(self) -> Groups:
        """Every group, weighted by source."""
        counts = {s: self.source.count(s) for s in set(self.source)}
        return Groups.of(self.judged, [0.0] * len(self.target), self.target,
                         [SOURCES[s] / counts[s] for s in self.source])


def examples(judge: OfflineJudge, rows: list[dict], sweep: list[dict], rng: random.Random) -> Examples:
    """Every training group (module docstring): HaluEval answers, synthetic statements, sweep answers."""
    made = Examples()

    def add(statements: list[str], contexts: list[str], target: float, source: int, each: bool) -> None:
        made.add(judge.support_features(statements, contexts), judge.support_words(statements, contexts), target,
                 source, each)

    for row in rows:
        for answer, label in ((row["right_answer"], 1), (row["hallucinated_answer"], 0)):
            add(split_statements(answer, row["question"]), [row["knowledge"]], label, 0, True)
    for question, statement, contexts, label, _ in synthetic(rows, rng):
        add(split_statements(statement, question) or [statement], contexts, label, 1, True)
    for row in sweep:
        add(split_statements(row["response"], row["user_input"]), row["retrieved_contexts"],
            row["gpt4"]["answer_consistency"], 2, False)
    return made


#: The candidates :func:`verdict_rule` tries: thresholds, and word counts above which a statement is long.
THRESHOLDS = np.round(np.arange(0.30, 0.901, 0.025), 3)
LONG_WORDS = (8, 10, 12, 14, 16, 18, 20, 25, 30)


def verdict_rule(made: Examples, bias: float, w: np.ndarray) -> tuple[float, int, float]:
    """``(threshold, long_words, long_threshold)`` of ``Verifier.supported``: of :data:`THRESHOLDS` and
    :data:`LONG_WORDS` (the long threshold at most the other), the rule with the best mean of three
    figures, one per source: accuracy on HaluEval's statements and on the synthetic ones (each labelled
    one by one), and on the sweep's answers the AUROC of the share of statements judged supported against
    GPT-4 finding every statement in the contexts (answer_consistency = 1): the ranking groundedness_pro
    and the diagnostics make of long answers. A rank, not the share's distance to answer_consistency: GPT-4
    passes most statements, and that distance would push every threshold down, HaluEval's hallucinations
    with it. Ties go to the first rule tried (the lowest thresholds, the fewest words)."""
    groups, source = made.groups(), np.array(made.source)
    p = 1 / (1 + np.exp(-(bias + groups.x @ w)))
    words, single, y = np.array(made.words), source < 2, groups.target
    fully = y[~single] == 1
    best, rule = -1.0, (1.0, 0, 1.0)
    for t in THRESHOLDS:
        for n in LONG_WORDS:
            for long_t in THRESHOLDS[THRESHOLDS <= t]:
                verdict = p >= np.where(words > n, long_t, t)
                share = np.bincount(groups.group, verdict, len(y)) / np.bincount(groups.group, minlength=len(y))
                score = np.mean([*(((share == y)[source == s]).mean() for s in (0, 1)),
                                 auroc(share[~single], fully)])
                if score > best:
                    best, rule = score, (float(t), n, float(long_t))
    return rule


def cross_validated(made: Examples, folds: int = 5) -> tuple[float, float]:
    """Weighted accuracy (mean ≥ 0.5 against target ≥ 0.5) and cross-entropy of each fold's groups,
    fitted on the other folds."""
    groups = made.groups()
    order = np.random.default_rng(0).permutation(len(groups.target))
    m = np.empty(len(groups.target))
    for k in range(folds):
        test = np.sort(order[k::folds])
        bias, w = fit(groups.subset(np.setdiff1d(order, test)))
        m[test] = groups.subset(test).means(bias, w)
    m, target = np.clip(m, 1e-6, 1 - 1e-6), groups.target
    return (float(groups.weight @ ((m >= 0.5) == (target >= 0.5))),
            float(-groups.weight @ (target * np.log(m) + (1 - target) * np.log(1 - m))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="folder holding halueval_qa/")
    parser.add_argument("--version", default="1", help="the weights' version, written in every result")
    parser.add_argument("--out", type=Path, default=WEIGHTS)
    args = parser.parse_args()
    rows, sweep = tuning_rows(args.data), sweep_rows(args.data)
    made = examples(OfflineJudge(), rows, sweep, random.Random(0))
    accuracy, log_loss = cross_validated(made)
    bias, w = fit(made.groups())
    cut, long_words, long_cut = verdict_rule(made, bias, w)
    counts = [made.source.count(s) for s in range(3)]
    print(f"{sum(map(len, made.judged))} training statements in {len(made.target)} groups: {counts[0]} HaluEval tuning statements, "
          f"{counts[1]} synthetic, {counts[2]} sweep answers; 5-fold accuracy {accuracy:.3f}, "
          f"cross-entropy {log_loss:.3f}")
    print("weights: " + ", ".join(f"{f} {v:+.3f}" for f, v in zip(FEATURES, w)) + f", bias {bias:+.3f}, "
          f"threshold {cut}, above {long_words} words {long_cut}")
    model = {"name": "verifier", "version": args.version, "bias": round(bias, 6), "threshold": cut,
             "long_words": long_words, "long_threshold": long_cut,
             "features": {f: round(float(v), 6) for f, v in zip(FEATURES, w)},
             "trained_on": f"HaluEval QA rows 0-99 and 300-399 (MIT), {counts[1]} synthetic statements from their "
                           f"passages, {counts[2]} tonic_validate sweep answers at question positions 0, 4, 8 (MIT)",
             "script": "tools/train_verifier.py", "cross_validated": {"accuracy": round(accuracy, 4),
                                                                     "log_loss": round(log_loss, 4)}}
    args.out.write_text(json.dumps(model, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
