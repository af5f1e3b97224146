"""Target configurations: the retriever and generator of a RAG system, declared in one file.

A configuration file (TOML, or YAML with a ``.yaml``/``.yml`` suffix) names the question
set, the parts and an optional grid::

    questions = "questions.jsonl"          # user_input, optional reference, retrieval_ground_truth
    metrics = ["context_recall", "context_precision", "ndcg"]   # what the sweep scores and ranks on
    metric_options = { ndcg = { k = 10 } }  # per-metric options, as `rag-eval run --metric-option`

    [call]                                 # how every part is called
    concurrency = 4                        # calls in flight at most
    timeout = 30                           # seconds per call
    max_attempts = 3                       # tries of a transient failure (timeout, 429, 5xx, connection)

    [retriever.bm25]                       # a Python callable package.module:function
    callable = "rag_example:bm25"
    version = "1"
    parameters = { top_k = 5 }

    [retriever.search]                     # an HTTP endpoint, JSON in and out
    url = "https://search.internal/query"
    request = { q = "{user_input}", k = "{top_k}" }       # body; "{name}" is an input or a parameter
    contexts = "hits.*.text"               # dotted paths into the JSON reply; * walks a list
    ids = "hits.*.id"                      # optional: retrieved_documents with ids and scores
    scores = "hits.*.score"
    headers = { Authorization = "Bearer ${SEARCH_TOKEN}" }   # ${VAR}: from the environment only
    version = "3"

    [generator.llm]                        # any OpenAI-compatible chat model
    model = "gpt-4o-mini"
    base_url = "${OPENAI_BASE_URL}"        # optional; the key is $OPENAI_API_KEY (or api_key_env)
    prompt = "Answer from the passages.\\n{contexts}\\nQuestion: {user_input}"
    version = "1"
    requires_env = ["OPENAI_BASE_URL"]     # left out of the grid (with a note) when unset

    [system.app]                           # or one callable returning contexts and response
    callable = "my_app:answer"

    [sweep]                                # the grid: one configuration per combination
    retriever = ["bm25", "search"]         # part names (default: every part declared)
    "retriever.top_k" = [3, 5, 10]         # a parameter of a part

A part's *version hash* covers its kind, what it calls (callable, URL, request and reply
paths, model, prompt), its declared ``version`` and its parameters, never a secret's value
(``${VAR}`` references stay unexpanded): the pipeline uses it as the part's data version,
and the call cache is keyed by it and the inputs. How the file is read and its keys' types checked
(and :class:`~rag_eval.metrics.sources.targets.config_file.TargetConfigError`, every problem of it):
``rag_eval.metrics.sources.targets.config_file``.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


from rag_eval.metrics.core.bounded import clip, quote
from rag_eval.metrics.judges.config import PER_METRIC
from rag_eval.metrics.core.registry import Registry, given, option_value
from rag_eval.metrics.sources.targets.config_file import TargetConfigError, check_shape, read_config_file

ROLES = ("retriever", "generator", "system")
_KINDS = {"callable": "callable", "url": "http", "model": "openai"}
#: A reference to an environment variable in a setting: ``${VAR}``.
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: Configurations a grid may expand to unless the caller allows more (``--max-configurations``).
MAX_CONFIGURATIONS = 256


@dataclass(frozen=True)
class Part:
    """One retriever, generator or system (retriever and generator in one callable).

    ``kind`` is ``callable``, ``http`` or ``openai``; ``spec`` what it calls (without
    parameters); ``parameters`` what it is called with; ``version`` the user's declared
    version; ``base`` the folder of the configuration file (callables are imported from it).
    """

    role: str
    name: str
    kind: str
    spec: dict[str, Any]
    parameters: dict[str, Any]
    version: str
    base: str = ""

    @property
    def version_hash(self) -> str:
        """16 hex digits of SHA-256 over kind, spec, declared version and parameters."""
        payload = json.dumps({"kind": self.kind, "spec": self.spec, "version": self.version,
                              "parameters": self.parameters}, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def describe(self) -> str:
        """``name v<version> (k=v, ...)``, as shown in tables and metadata (no secret)."""
        params = ", ".join(f"{k}={v}" for k, v in sorted(self.parameters.items()))
        return f"{self.name} v{self.version}" + (f" ({params})" if params else "")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (``Part(**d)`` rebuilds it)."""
        return {"role": self.role, "name": self.name, "kind": self.kind, "spec": self.spec,
                "parameters": self.parameters, "version": self.version, "base": self.base}


@dataclass(frozen=True)
class CallSettings:
    """Concurrency, per-call timeout (s), attempts of a transient failure and the cache file."""

    concurrency: int = 4
    timeout: float = 30.0
    max_attempts: int = 3
    cache_path: str = ".rag_eval_cache/targets.sqlite"


@dataclass(frozen=True)
class Configuration:
    """One point of the grid: a retriever and a generator, or a system, under a ``name``
    made of the part names and the swept parameters (``bm25-extractive-top_k5``)."""

    name: str
    parts: dict[str, Part]
    call: CallSettings = field(default_factory=CallSettings)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe (stored in the partition's ``target.json``)."""
        return {"name": self.name, "parts": {r: p.to_dict() for r, p in self.parts.items()},
                "call": vars(self.call)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Configuration:
        """The inverse of :meth:`to_dict`."""
        return cls(data["name"], {r: Part(**p) for r, p in data["parts"].items()}, CallSettings(**data["call"]))


@dataclass(frozen=True)
class SweepConfig:
    """A parsed configuration file: question set path, metrics, configurations, skipped parts."""

    path: Path
    questions: Path
    metrics: list[str]
    metric_options: dict[str, dict[str, Any]]
    configurations: list[Configuration]
    skipped: dict[str, str]


def _part(path: Path, role: str, name: str, entry: Any) -> Part:
    where = f"{path}: [{role}.{clip(name, 80)}]"
    if not isinstance(entry, dict):
        raise TargetConfigError(f"{where} must be a table")
    kinds = [k for k in _KINDS if k in entry]
    if len(kinds) != 1 or (role != "generator" and kinds[0] == "model") or \
            (role == "system" and kinds[0] != "callable"):
        allowed = {"retriever": "callable or url", "generator": "callable, url or model", "system": "callable"}[role]
        raise TargetConfigError(f"{where} needs exactly one of: {allowed}")
    kind = _KINDS[kinds[0]]
    if kind == "callable" and not re.fullmatch(r"[\w.]+:\w+", str(entry["callable"])):
        raise TargetConfigError(f"{where}: callable {quote(entry['callable'])}: write package.module:function")
    if kind == "http" and ("contexts" if role == "retriever" else "response") not in entry:
        raise TargetConfigError(f"{where}: an HTTP {role} needs the reply path "
                                f"{'contexts' if role == 'retriever' else 'response'} (e.g. \"hits.*.text\")")
    if kind == "openai" and "prompt" not in entry:
        raise TargetConfigError(f"{where}: a chat-model generator needs a prompt template")
    for key, value in (entry.get("headers") or {}).items():
        if _secret_like(key) and not ENV_REFERENCE.fullmatch(str(value).split()[-1] if str(value).split() else ""):
            raise TargetConfigError(f"{where}: header {key} holds a literal secret; write \"${{VAR}}\" and set VAR in "
                                    "the environment")
    for key in ("url", "base_url"):
        parts = urlsplit(ENV_REFERENCE.sub("x", str(entry.get(key, ""))))
        if parts.username or parts.password or re.search(r"(key|token|secret)=(?!\$\{)", str(entry.get(key, "")),
                                                          re.IGNORECASE):
            raise TargetConfigError(f"{where}: {key} holds credentials; put them in the environment and write "
                                    "\"${VAR}\" (in a header or the URL)")
    if "api_key" in entry:
        raise TargetConfigError(f"{where}: api_key does not belong in the file; set api_key_env to the name of the "
                                "environment variable holding it (default OPENAI_API_KEY)")
    parameters = entry.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise TargetConfigError(f"{where}: parameters must be a table")
    spec = {k: v for k, v in entry.items() if k not in ("parameters", "version", "requires_env")}
    return Part(role, name, kind, spec, dict(parameters), str(entry.get("version", "0")), str(path.parent.resolve()))


def _secret_like(header: str) -> bool:
    name = header.lower()
    return name in ("authorization", "x-api-key", "api-key", "proxy-authorization") or "token" in name


def _label(value: Any) -> str:
    """``value`` as a name part (letters, digits, ``.``, ``_``); a value that loses characters
    on the way (``a b``, ``a/b``, ``-1``) gets 6 hex of its JSON, so it stays apart from the
    value it now spells (``a_b``) and its name does not depend on the rest of the grid."""
    label = re.sub(r"[^A-Za-z0-9._]+", "_", str(value)).strip("_") or "x"
    if label == str(value):
        return label
    return f"{label}_{hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:6]}"


def _unique(path: Path, configurations: list[Configuration]) -> list[Configuration]:
    """Names made unique: configurations whose labels still meet (``1`` and ``"1"``) get 6 hex
    of their parts' version hashes; the same parts twice (a value repeated in the grid) are refused."""
    def digest(configuration: Configuration) -> str:
        hashes = {role: part.version_hash for role, part in configuration.parts.items()}
        return hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()[:6]

    counts = Counter(c.name for c in configurations)
    named = [Configuration(f"{c.name}-{digest(c)}", c.parts, c.call) if counts[c.name] > 1 else c
             for c in configurations]
    repeated = sorted(name for name, n in Counter(c.name for c in named).items() if n > 1)
    if repeated:
        raise TargetConfigError(f"{path}: [sweep] yields the same configuration more than once "
                                f"({', '.join(repeated)}): a value or part name is repeated in the grid")
    return named


def load_config(path: str | Path, max_configurations: int = MAX_CONFIGURATIONS,
                registry: Registry | None = None) -> SweepConfig:
    """Parse a configuration file into its configurations (the grid expanded), each under a
    unique name (see :func:`_label` and :func:`_unique`); its ``metric_options`` are checked against
    the metrics of ``registry`` (default the built-in ones).

    Raises
    ------
    TargetConfigError
        For a missing or unparsable file, a part without exactly one of ``callable``,
        ``url``, ``model``, a literal secret, a sweep entry naming no declared part or
        parameter, or neither a system nor a retriever and a generator; a grid of more than
        ``max_configurations`` configurations, or one yielding the same configuration twice.
    """
    path = Path(path)
    data = read_config_file(path)
    check_shape(path, data)
    parts: dict[str, dict[str, Part]] = {role: {} for role in ROLES}
    skipped: dict[str, str] = {}
    for role in ROLES:
        for name, entry in (data.get(role) or {}).items():
            part = _part(path, role, name, entry)
            missing = [v for v in entry.get("requires_env", []) if not os.environ.get(v)]
            if missing:
                skipped[f"{role}.{name}"] = f"{', '.join(missing)} not set"
                continue
            parts[role][name] = part
    sweep = dict(data.get("sweep") or {})
    try:
        call = CallSettings(**(data.get("call") or {}))
    except TypeError:
        raise TargetConfigError(f"{path}: [call] takes concurrency, timeout, max_attempts and cache_path, got "
                                f"{quote(sorted(data['call']))}") from None
    axes: list[tuple[str, list[Any]]] = []
    roles = ["system"] if parts["system"] else ["retriever", "generator"]
    for role in roles:
        names = sweep.pop(role, list(parts[role]))
        names = [names] if isinstance(names, str) else names
        if not all(isinstance(n, str) for n in names):
            raise TargetConfigError(f"{path}: sweep.{role}: names of declared {role}s, got {quote(names)}")
        unknown = [n for n in names if n not in parts[role] and f"{role}.{n}" not in skipped]
        if unknown or not parts[role]:
            named = f" {quote(unknown)}" if unknown else ""
            raise TargetConfigError(f"{path}: no {role}{named} declared (declare [{role}.NAME], "
                                    "or a [system.NAME] callable returning contexts and response)")
        axes.append((role, [n for n in names if n in parts[role]]))
    for key, values in sweep.items():
        role, _, param = key.partition(".")
        if role not in roles or not param or not isinstance(values, list) or not values:
            raise TargetConfigError(f"{path}: [sweep] {quote(key)}: write \"<retriever|generator|system>.<parameter>\" = "
                                    "[values...]")
        axes.append((key, values))
    size = math.prod(len(values) for _, values in axes)
    if not size:
        raise TargetConfigError(f"{path}: [sweep] names no value for {quote([key for key, values in axes if not values])}: "
                                "the grid is empty")
    if size > max_configurations:
        raise TargetConfigError(f"{path}: [sweep] expands to {size} configurations, more than the cap of "
                                f"{max_configurations}: narrow the grid, or allow it with --max-configurations {size}")
    configurations = []
    for point in itertools.product(*(values for _, values in axes)):
        chosen = dict(zip((key for key, _ in axes), point))
        selected = {role: parts[role][chosen[role]] for role in roles}
        labels = [chosen[role] for role in roles]
        for key, value in chosen.items():
            role, _, param = key.partition(".")
            if param:
                old = selected[role]
                selected[role] = Part(old.role, old.name, old.kind, old.spec, {**old.parameters, param: value},
                                      old.version, old.base)
                labels.append(f"{_label(param)}{_label(value)}")
        configurations.append(Configuration("-".join(_label(x) for x in labels), selected, call))
    options = data.get("metric_options") or {}
    known = given(registry)
    for metric, chosen in options.items():  # checked here, not as the run starts (a Dagster config error)
        converted = {}
        for option, value in chosen.items():
            try:
                converted[option] = option_value(metric, option, value, known)
            except KeyError:
                raise TargetConfigError(f"{path}: metric_options.{clip(f'{metric}.{option}', 80)}: no such metric or option "
                                        "(write { ndcg = { k = 10 } })") from None
            except ValueError as exc:
                raise TargetConfigError(f"{path}: metric_options.{metric}.{clip(option, 80)}: {exc}, got {quote(value)}") from None
        try:  # the metric checks its options' domains itself (k >= 1...)
            known[metric](**{k: v for k, v in converted.items() if k not in PER_METRIC})
        except ValueError as exc:
            raise TargetConfigError(f"{path}: metric_options.{metric}: {exc}") from None
    return SweepConfig(path, (path.parent / data["questions"]).resolve(), list(data.get("metrics") or []),
                       options, _unique(path, configurations), skipped)


def expand_env(value: str) -> str:
    """``${VAR}`` replaced by the environment's value, at call time only.

    Raises
    ------
    TargetConfigError
        Naming the variable (never a value) when it is unset.
    """
    def one(match: re.Match) -> str:
        if match[1] not in os.environ:
            raise TargetConfigError(f"environment variable {match[1]} is not set")
        return os.environ[match[1]]

    return ENV_REFERENCE.sub(one, value)
