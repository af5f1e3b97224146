"""Labelled examples an LLM judge reads before it verifies statements (``rag-eval align`` with an LLM judge).

A judge variant of the LLM judge is a list of rows a person labelled and the default judge got wrong,
written as few-shot examples into every ``statement_support`` prompt (faithfulness, groundedness_pro,
noise_sensitivity), the way MLflow's and DeepEval's judge alignment add a judge's mistakes to its prompt.
The file (``rag-eval align`` writes it, ``--verifier FILE`` reads it) holds ``"kind": "llm_examples"``,
a ``name`` and the ``examples``: each the row's ``statements``, its ``contexts``, the person's ``label``
(the share of the statements the contexts support, on [0, 1]) and what the judge had given (``judged``).
The variant is named by its content (``<name>-<first 10 hex digits of the examples' SHA-256>``), so an
edited file is another judge in results, cache keys and code versions.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rag_eval.metrics.errors import SettingsError, command

#: What marks a variant file of the LLM judge (the offline verifier's weights have no ``kind``).
KIND = "llm_examples"
#: The contexts of one example are cut to this many characters in the prompt (statements are whole).
CONTEXT_CHARS = 1500
#: Ends the examples' part of a prompt; the judgement's own prompt follows it.
END = "\n\nNow judge the following, by the same standard.\n\n"


@dataclass(frozen=True)
class Example:
    """One labelled row: its ``statements`` (as the metric splits the response), its ``contexts``, the
    person's ``label`` on [0, 1] and the default judge's faithfulness of it, ``judged`` on [0, 1]."""

    statements: tuple[str, ...]
    contexts: tuple[str, ...]
    label: float
    judged: float

    def render(self, number: int) -> str:
        """The example as a prompt shows it, its contexts cut to :data:`CONTEXT_CHARS` in all."""
        kept, room = [], CONTEXT_CHARS
        for context in self.contexts:
            if room <= 0:
                break
            kept.append(context if len(context) <= room else context[:room] + " [...]")
            room -= len(context)
        contexts = "\n".join(f"[C{i}] {c}" for i, c in enumerate(kept, start=1))
        statements = "\n".join(f"[S{i}] {s}" for i, s in enumerate(self.statements, start=1))
        return (f"Example {number}\nContexts:\n{contexts}\nStatements:\n{statements}\n"
                f"The person's label: {self.label:.2f} (the share of these statements the contexts support; "
                f"1 = all, 0 = none); an automatic judge had said {self.judged:.2f}.")


class Examples:
    """Few-shot examples of the LLM judge's ``statement_support`` prompts (see the module docstring).

    ``label`` (``aligned-<hash>``) names the variant in the judge's name, its code version and the
    cache keys of its judgements; ``prefix`` is the text put before each prompt.

    Raises
    ------
    SettingsError
        A name that cannot name a judge, no example, or an example without statements or contexts, with
        a label or judged value outside [0, 1] (``source``, the file, named).
    """

    def __init__(self, examples: Sequence[Example], name: str = "aligned", source: str = "examples",
                 path: Path | None = None) -> None:
        self.examples, self.name, self.path = tuple(examples), name, path
        if not isinstance(name, str) or not re.fullmatch(r"[\w.]{1,40}", name):
            raise SettingsError(f"{source}: the name must be letters, digits, '.' or '_' (40 at most): it names the judge")
        if not self.examples:
            raise SettingsError(f"{source}: no example")
        for i, e in enumerate(self.examples, start=1):
            if not e.statements or not e.contexts or not all(isinstance(t, str) for t in (*e.statements, *e.contexts)):
                raise SettingsError(f"{source}: example {i} needs statements and contexts (lists of strings)")
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= 1
                       for v in (e.label, e.judged)):
                raise SettingsError(f"{source}: example {i}'s label and judged must be numbers in [0, 1]")
        canonical = json.dumps([asdict(e) for e in self.examples], sort_keys=True, ensure_ascii=False)
        self.version = hashlib.sha256(canonical.encode()).hexdigest()[:10]

    def __len__(self) -> int:
        return len(self.examples)

    @property
    def label(self) -> str:
        """``<name>-<version>``: the variant in the judge's name and code version."""
        return f"{self.name}-{self.version}"

    @property
    def prefix(self) -> str:
        """The examples' part of a prompt, ending with :data:`END`."""
        shown = "\n\n".join(e.render(i) for i, e in enumerate(self.examples, start=1))
        return ("A person labelled the examples below; where they differ from an automatic judge, the person is "
                f"right. Apply their standard of what the contexts support.\n\n{shown}{END}")

    def model(self, **about: Any) -> dict[str, Any]:
        """The file's content (:meth:`read` reads it back); ``about`` adds fields for the reader."""
        return {"kind": KIND, "name": self.name, "version": self.version, **about,
                "examples": [{"statements": list(e.statements), "contexts": list(e.contexts), "label": e.label,
                              "judged": e.judged} for e in self.examples]}

    @classmethod
    def read(cls, path: Path, data: dict[str, Any]) -> Examples:
        """The examples of a variant file's parsed content ``data`` (``path`` names it in errors).

        Raises
        ------
        SettingsError
            As :class:`Examples`, or when ``examples`` is not a list of objects with those four fields.
        """
        try:
            if not isinstance(data["examples"], list) or not all(
                    isinstance(e, dict) and isinstance(e["statements"], list) and isinstance(e["contexts"], list)
                    for e in data["examples"]):
                raise TypeError("examples must be a list of objects whose statements and contexts are lists")
            examples = [Example(tuple(e["statements"]), tuple(e["contexts"]), e["label"], e["judged"])
                        for e in data["examples"]]
        except SettingsError:
            raise
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise SettingsError(f"{path}: not an LLM judge's examples file ({type(exc).__name__}: {str(exc)[:200]}); "
                                f"`{command('align')}` with an LLM judge writes one") from None
        return cls(examples, data.get("name", "aligned"), str(path), Path(path))


def read_variant(path: str | Path) -> Any:
    """The judge variant in ``path``, decided by its content: :class:`Examples` for a file with
    ``"kind": "llm_examples"`` (the LLM judge's), else the offline judge's ``Verifier`` weights.

    Raises
    ------
    SettingsError
        A file that cannot be read or is neither kind (naming the file).
    """
    from rag_eval.metrics.judges.verifier import Verifier

    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))  # a file saved by an editor may start with a BOM
    except (OSError, ValueError, RecursionError):
        return Verifier(path)  # says why it cannot be read, as it always has
    if isinstance(data, dict) and data.get("kind") == KIND:
        return Examples.read(path, data)
    return Verifier(path)
