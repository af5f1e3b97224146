"""Settings of the LLM judge, declared once: :class:`LLMConfig` (the ``judge`` resource,
the CLI's judge options and ``LLMConfig.from_env`` all read its fields)."""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, get_args, get_origin, get_type_hints

from pydantic import Field, TypeAdapter, ValidationError

from rag_eval.metrics.judges.endpoint import check_base_url
from rag_eval.metrics.judges.plan import Budget
from rag_eval.metrics.errors import SettingsError

#: The judge settings a metric may set for itself (``LLMJudge.with_options``, the CLI's
#: ``--metric-option``, a metric asset's run config).
PER_METRIC = ("model", "temperature", "strictness")
#: The values of ``response_format``: a JSON schema the provider enforces, or JSON mode with the
#: schema in the prompt (DeepSeek, some vLLM builds).
RESPONSE_FORMATS = ("json_schema", "json_object")
#: The openai client's default base URL.
OPENAI_URL = "https://api.openai.com/v1"

#: At least one / zero or more / more than zero (the domains of the counts and durations below).
Positive = Annotated[int, Field(ge=1)]
NonNegative = Annotated[int, Field(ge=0)]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
#: The sampling temperature the OpenAI API accepts: finite, 0 to 2.
Temperature = Annotated[float, Field(ge=0, le=2, allow_inf_nan=False)]


@dataclass
class LLMConfig:
    """Settings of the LLM judge. ``api_key`` and ``embedding_api_key`` are never logged.

    ``from_env`` reads ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``OPENAI_MODEL``,
    ``EMBEDDING_MODEL``, ``EMBEDDING_BASE_URL`` and ``EMBEDDING_API_KEY`` (the embedding
    ones default to the chat ones).

    Every numeric setting has its domain in its annotation (``temperature`` finite in
    [0, 2], as the OpenAI API takes it; ``strictness``, the questions AnswerRelevancy
    generates, 1 or more, as RAGAS's; counts and limits 0 or 1 or more; ``timeout``
    above 0): a value outside it is refused with a ``ValueError`` naming the setting, and
    the models derived from :meth:`types` (the ``judge`` resource, the run config, the
    CLI's ``--metric-option``) refuse it too.

    ``cache_path`` is the judgement cache (``None``: none); its answers are keyed by the
    endpoint as well as the model, unless ``cache_across_endpoints`` lets any endpoint's
    answer for the same model and inputs be reused.
    """

    model: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    embedding_model: str = "text-embedding-3-small"
    embedding_base_url: str | None = None
    embedding_api_key: str | None = field(default=None, repr=False)
    temperature: Temperature = 0.0
    seed: int | None = 7
    #: Which repeated judgement this is (``rag-eval gate --repeats K`` asks repeats 0 .. K-1): the
    #: request's ``seed`` is ``seed + repeat``, and the cache key carries it from repeat 1 on (so
    #: repeat 0 is the ordinary judgement and its cached answers stay valid).
    repeat: NonNegative = 0
    strictness: Positive = 3
    response_format: str = "json_schema"
    concurrency: Positive = 16
    timeout: Seconds = 60.0
    max_attempts: Positive = 5
    max_retry_wait: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 60.0
    max_prompt_chars: Positive = 60_000
    #: Ceiling of ``max_tokens`` when a reply cut at the token limit is asked again.
    max_output_tokens: Positive = 16_384
    #: Per-row budget of each metric (``rag_eval.metrics.judges.plan.Budget``); 0 or ``None``: no limit.
    max_row_requests: NonNegative | None = 50
    max_row_tokens: NonNegative | None = 200_000
    cache_path: str | None = ".rag_eval_cache/judgements.sqlite"
    cache_across_endpoints: bool = False

    def __post_init__(self) -> None:
        if self.response_format not in RESPONSE_FORMATS:
            raise SettingsError(f"response_format: one of {', '.join(RESPONSE_FORMATS)} (got {self.response_format!r})")
        check_base_url(self.base_url, "base_url")
        check_base_url(self.embedding_base_url, "embedding_base_url")
        for name, check in _checks().items():
            try:
                setattr(self, name, check.validate_python(getattr(self, name)))
            except ValidationError as exc:
                raise SettingsError(f"{name}: {exc.errors()[0]['msg']} (got {getattr(self, name)!r})") from None

    @classmethod
    def types(cls) -> dict[str, Any]:
        """Each setting's type with its domain (``Annotated`` pydantic constraints), by name."""
        return get_type_hints(cls, include_extras=True)

    @classmethod
    def from_env(cls, **overrides: Any) -> LLMConfig:
        """Configuration from the environment, then ``overrides`` (``None`` values ignored)."""
        env = {"api_key": os.environ.get("OPENAI_API_KEY"), "base_url": os.environ.get("OPENAI_BASE_URL"),
               "model": os.environ.get("OPENAI_MODEL"), "embedding_model": os.environ.get("EMBEDDING_MODEL"),
               "embedding_base_url": os.environ.get("EMBEDDING_BASE_URL"),
               "embedding_api_key": os.environ.get("EMBEDDING_API_KEY")}
        values: dict[str, Any] = {k: v for k, v in env.items() if v not in (None, "")}
        values.update({k: v for k, v in overrides.items() if v not in (None, "")})  # an unset override keeps the env's
        return cls(**values)

    #: Fields that hold credentials: read from the environment, never recorded nor shipped.
    SECRETS = ("api_key", "embedding_api_key")

    @classmethod
    def public_fields(cls) -> list[str]:
        """The names of every setting but the credentials."""
        return [f.name for f in fields(cls) if f.name not in cls.SECRETS]

    def public(self) -> dict[str, Any]:
        """Every setting but the credentials, by name."""
        return {name: getattr(self, name) for name in self.public_fields()}

    @property
    def budget(self) -> Budget:
        """The per-row budget of each metric."""
        return Budget(self.max_row_requests, self.max_row_tokens)

    @property
    def configured(self) -> bool:
        """True when an endpoint or a key is set: the pipeline then uses the LLM judge."""
        return bool(self.base_url or self.api_key)


@functools.cache
def _checks() -> dict[str, TypeAdapter]:
    """A validator of every setting whose type declares a domain."""
    return {name: TypeAdapter(kind) for name, kind in LLMConfig.types().items()
            if Annotated in (get_origin(kind), *map(get_origin, get_args(kind)))}
