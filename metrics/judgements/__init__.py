"""Judgements, one module each: typed input and verdict, LLM prompt and schema, version, offline rule.

A metric lists the judgements it asks for (``Metric.judgements``) and asks a judge for
them with ``await judge.ask(judgement, judgement.Input(...))``; see
:mod:`metrics.judgements.base`. A new kind of judgement is a new module here; nothing
lists them (the registry collects them from the metrics).
"""
from metrics.judgements.base import Judgement

__all__ = ["Judgement"]
