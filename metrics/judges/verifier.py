"""The learned top layer of the offline judge: a calibrated probability that the contexts support a statement.

For each (statement, retrieved contexts) :func:`features` measures a few kinds of evidence, each on
[0, 1]: the offline rules' own verdict on a short answer, what contradiction they found, the share of
the statement's words and content words found anywhere in the contexts, the best share found in one
passage, the same share weighted by how rare each word is among the contexts' sentences, and the
shares of the statement's numbers and names the contexts never say. :class:`Verifier` turns them into
a probability with a logistic model whose weights live in ``verifier.json`` beside this file, written
by ``tools/train_verifier.py`` (HaluEval QA tuning rows and synthetic pairs made from their passages,
tonic_validate's retriever-sweep answers at three of its question positions: all MIT; the script's
docstring says how). Weights of support evidence are kept >= 0 and of missing or contradicted
evidence <= 0 when fitted (monotone: more overlap never lowers support), and the answer's length is
left out (HaluEval's hallucinated answers are longer: a learner finds that at once and it does not
transfer, ``docs/judges.md``). The encoder's cosine was tried and fitted a weight of 0 (on long
answers it ranks worse than word recall), so it is not read.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag_eval.metrics.errors import SettingsError, command
from rag_eval.metrics.text import content_tokens, has_cjk, names, quantities
from rag_eval.metrics.text.sentences import _CJK_RUN

WEIGHTS = Path(__file__).with_name("verifier.json")

#: Evidence the model reads, in the order of its weights; a ``+`` feature may only raise support,
#: a ``-`` one only lower it.
FEATURES = {"rule_short": "+", "changed_fact": "-", "changed_wording": "-", "word_recall": "+", "content_recall": "+",
            "best_passage_recall": "+", "idf_recall": "+", "missing_numbers": "-", "missing_names": "-"}


def bow_tokens(text: str) -> list[str]:
    """Lower-case word tokens (``\\w+``); for text with CJK characters, character bigrams of its
    CJK runs too: the tokens of bag-of-words recall, the baseline every judge is measured against."""
    text = text.lower()
    if not has_cjk(text):
        return re.findall(r"\w+", text)
    bigrams = [run[i:i + 2] for run in _CJK_RUN.findall(text) for i in range(max(1, len(run) - 1))]
    return bigrams + re.findall(r"\w+", _CJK_RUN.sub(" ", text))


def word_recall(text: str, known: set[str] | frozenset[str]) -> float:
    """Share of ``text``'s :func:`bow_tokens` in ``known``, on [0, 1]; 1.0 for a text without words."""
    tokens = bow_tokens(text)
    return sum(t in known for t in tokens) / len(tokens) if tokens else 1.0


@dataclass(frozen=True)
class Evidence:
    """What :func:`features` reads of the contexts once per call: every passage's content tokens,
    the contexts' words, quantities and lower-cased text, and each content token's document
    frequency among the contexts' sentences (for the rarity weights)."""

    passage_tokens: Sequence[frozenset[str] | set[str]]
    words: frozenset[str]
    quantities: frozenset[str]
    lower: str
    frequency: dict[str, int]
    sentences: int

    @classmethod
    def of(cls, contexts: Sequence[str], passage_tokens: Sequence[frozenset[str] | set[str]],
           sentence_tokens: Sequence[frozenset[str] | set[str]]) -> Evidence:
        """The evidence of ``contexts`` whose passages (sentences and windows) and sentences have
        the content tokens given (the offline judge computes them once for its rules)."""
        joined = "\n".join(contexts)
        frequency: dict[str, int] = {}
        for tokens in sentence_tokens:
            for token in tokens:
                frequency[token] = frequency.get(token, 0) + 1
        return cls(passage_tokens, frozenset(bow_tokens(joined)), frozenset(quantities(joined)), joined.lower(),
                   frequency, len(sentence_tokens))


def features(statement: str, rule: int, contradiction: str | None, short: bool, evidence: Evidence,
             name_in: Any, denies: bool = False) -> dict[str, float]:
    """The :data:`FEATURES` of ``statement`` (for a short answer judged with its question: the
    answer) against the contexts, each on [0, 1].

    ``rule`` is the offline rules' verdict (0 or 1), read as ``rule_short`` for a short answer or
    phrase only (``short``: the rules were written for those; on long sentences their verdict ranked
    real answers worse than word recall, ``docs/judges.md``); ``contradiction`` what they found the
    contexts saying otherwise: ``"fact"`` (a changed number, another agent: ``changed_fact``),
    ``"wording"`` (a changed word, a denial: ``changed_wording``, which paraphrase also sets off), or
    ``None``; ``name_in(name, lower_text)`` the rules' test of a name in a text; ``denies``: the
    answer denies ``statement`` (a "no" to its question's claim), so the numbers and names of it the
    contexts lack are no evidence against it (``missing_*`` are 0).
    """
    tokens = content_tokens(statement)
    all_tokens = evidence.frequency.keys()  # every sentence's tokens: those of every passage
    if tokens:
        best = max((len(tokens & known) / len(tokens) for known in evidence.passage_tokens), default=0.0)
        weights = {t: math.log((evidence.sentences + 1) / (evidence.frequency.get(t, 0) + 1)) + 1 for t in tokens}
        idf = sum(w for t, w in weights.items() if t in all_tokens) / sum(weights.values())
        content = len(tokens & all_tokens) / len(tokens)
    else:
        best = idf = content = 1.0
    stated_quantities, stated_names = (set(), set()) if denies else (quantities(statement), names(statement))
    return {"rule_short": float(rule and short),
            "changed_fact": float(contradiction == "fact"), "changed_wording": float(contradiction == "wording"),
            "word_recall": word_recall(statement, evidence.words), "content_recall": content,
            "best_passage_recall": best, "idf_recall": idf,
            "missing_numbers": (len(stated_quantities - evidence.quantities) / len(stated_quantities)
                                if stated_quantities else 0.0),
            "missing_names": (sum(not name_in(n, evidence.lower) for n in stated_names) / len(stated_names)
                              if stated_names else 0.0)}


class Verifier:
    """The logistic model of ``verifier.json`` (or of ``path``: an aligned variant, ``rag-eval align``).

    ``probability(values)`` is ``sigmoid(bias + weights · values)`` over the :data:`FEATURES`, on
    [0, 1], higher = more likely supported; :meth:`supported` judges a statement supported
    (``Verdict.verdict``) at ``threshold`` or above, or at ``long_threshold`` or above when it has more than
    ``long_words`` words (a file without these two keys judges every statement at ``threshold``), all three
    chosen with the weights. ``name`` and ``version`` identify the weights in every result, cache key and
    asset code version.

    Raises
    ------
    SettingsError
        A file that cannot be read, is not such a model, names other features than :data:`FEATURES`,
        holds a non-finite number, a weight of the wrong sign, a threshold outside (0, 1] or a ``long_words``
        that is not a whole number >= 0, or has a
        name or version that cannot name a judge (a BOM at its start is read past). ``shipped``: the file is
        the shipped ``verifier.json`` (a variant also names the judge, ``OfflineJudge.name``). The version of a file other than the shipped one
        gains the first 8 hex digits of its weights' SHA-256 (``<version>.<digest>``).
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path or WEIGHTS)
        try:
            model = json.loads(self.path.read_text(encoding="utf-8-sig"))  # an editor may have added a BOM
            features, name, version = dict(model["features"]), model["name"], model["version"]
            if list(features) != list(FEATURES):
                raise SettingsError(f"written for another verifier (its features {list(features)[:12]} are not "
                                    f"{list(FEATURES)}): run `{command('align')}` again")
            numbers = {"bias": model["bias"], "threshold": model["threshold"],
                       "long_threshold": model.get("long_threshold", model["threshold"]), **features}
            long_words = model.get("long_words", 0)
            if isinstance(long_words, bool) or not isinstance(long_words, int) or long_words < 0:
                raise SettingsError(f"long_words {long_words!r} is not a whole number >= 0")
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                       for v in numbers.values()) or not all(isinstance(v, str) for v in (name, version)):
                raise SettingsError("bias, threshold and weights must be finite numbers, name and version strings")
        except OSError as exc:
            raise SettingsError(f"{self.path}: cannot read the verifier's weights ({exc.strerror}); "
                                f"`{command('align')}` writes them") from None
        except SettingsError as exc:
            raise SettingsError(f"{self.path}: {exc}") from None
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError) as exc:
            raise SettingsError(f"{self.path}: not a verifier weights file ({type(exc).__name__}: "
                                f"{str(exc)[:200]})") from None
        self.weights = np.array([float(features[f]) for f in FEATURES], dtype=float)
        self.bias, self.threshold = float(model["bias"]), float(model["threshold"])
        self.long_threshold, self.long_words = float(numbers["long_threshold"]), long_words
        wrong = [f for f, w in zip(FEATURES, self.weights) if (w < 0 if FEATURES[f] == "+" else w > 0)]
        outside = [t for t in (self.threshold, self.long_threshold) if not 0 < t <= 1]
        if wrong or outside:
            raise SettingsError(f"{self.path}: " + (f"weights of the wrong sign: {', '.join(wrong)} (support "
                                                    "evidence >= 0, missing or contradicted evidence <= 0)"
                                                    if wrong else f"threshold {outside[0]:g} is not in (0, 1]"))
        # Another file than the shipped one is named by its content too: a file edited by hand under the
        # same name and version is another judge, in every result, code version and cache key.
        canonical = json.dumps({"bias": self.bias, "threshold": self.threshold, "features": numbers,
                                "long_words": long_words}, sort_keys=True)
        self.shipped = shipped = self.path.resolve() == WEIGHTS.resolve()
        self.name = name
        self.version = version if shipped else f"{version}.{hashlib.sha256(canonical.encode()).hexdigest()[:8]}"
        if not re.fullmatch(r"[\w.-]{1,64}", f"{self.name}-{self.version}"):
            raise SettingsError(f"{self.path}: name and version must be letters, digits, '.', '_' or '-' "
                                "(64 at most): they name the judge in results and cache keys")

    def probability(self, values: dict[str, float]) -> float:
        """Probability of support in [0, 1] from :func:`features`' values."""
        z = self.bias + float(self.weights @ np.array([values[f] for f in FEATURES]))
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))  # no overflow

    def supported(self, probability: float, words: int) -> int:
        """The verdict (1 supported, 0 not) of a statement of ``words`` words (:func:`bow_tokens` of what
        :func:`features` read) whose :meth:`probability` is ``probability``: at ``long_threshold`` or above
        when ``words`` > ``long_words``, else at ``threshold`` or above. A long sentence's probability
        is capped by the words a paraphrase changes; a short one's is not."""
        return int(probability >= (self.long_threshold if words > self.long_words else self.threshold))

    def deciding(self, values: dict[str, float], count: int = 3) -> dict[str, float]:
        """The ``count`` features that moved this probability most (weight × value), with their values."""
        pushes = {f: abs(w * values[f]) for f, w in zip(FEATURES, self.weights)}
        return {f: round(values[f], 4) for f in sorted(pushes, key=lambda f: -pushes[f])[:count]}
