"""Judgements, one module each: typed input and verdict, LLM prompt and schema, version, offline rule.

A metric lists the judgements it asks for (``Metric.judgements``) and asks a judge for
them with ``await judge.ask(judgement, judgement.Input(...))``; see
:mod:`rag_eval.metrics.judgements.base`. A new kind of judgement is a new module here; nothing
lists them (the registry collects them from the metrics).
"""
from rag_eval.metrics.judgements.base import Judgement

__all__ = ["Judgement"]
