"""Judgements, one module each: typed input and verdict, LLM prompt and schema, version, offline rule.

A metric lists the judgements it asks for (``Metric.judgements``) and asks a judge for
them with ``await judge.ask(judgement, judgement.Input(...))``; see
:mod:`metrics.judgements.base`.
"""
from metrics.judgements.answer_questions import answer_questions
from metrics.judgements.base import Judgement
from metrics.judgements.context_relevance import context_relevance
from metrics.judgements.context_support_matrix import context_support_matrix
from metrics.judgements.context_usefulness import context_usefulness
from metrics.judgements.entities import entities
from metrics.judgements.likert_groundedness import likert_groundedness
from metrics.judgements.likert_relevance import likert_relevance
from metrics.judgements.likert_response_completeness import likert_response_completeness
from metrics.judgements.likert_retrieval import likert_retrieval
from metrics.judgements.reference_attribution import reference_attribution
from metrics.judgements.statement_classification import statement_classification
from metrics.judgements.statement_support import statement_support
from metrics.judgements.whole_context_relevance import whole_context_relevance

#: Every judgement, by kind.
JUDGEMENTS: dict[str, Judgement] = {j.kind: j for j in (
    statement_support, answer_questions, context_relevance, reference_attribution, context_usefulness,
    context_support_matrix, entities, whole_context_relevance, statement_classification,
    likert_groundedness, likert_relevance, likert_retrieval, likert_response_completeness)}

#: The version of every LLM request kind (recorded in the LLM judge's ``describe()``).
PROMPT_VERSIONS: dict[str, str] = {kind: j.version for j in JUDGEMENTS.values() for kind in j.requests}

__all__ = ["JUDGEMENTS", "PROMPT_VERSIONS", "Judgement", *JUDGEMENTS]
