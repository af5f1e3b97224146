"""A custom great-expectations expectation, built GE's way (a column map metric and its
expectation): every item of the list in each cell of a column is in a set.

GE 1.x has no expectation on the items of list-valued cells (its set and length
expectations treat a list as one value). The suite (``rag_eval.assets.expectations``) states the
allowed relevance labels of ``retrieval_ground_truth`` with it. Importing this module
imports great-expectations and registers the expectation: ``rag_eval.assets.expectations``
imports it where the suite runs, never at the code location's load.
"""
from typing import Any

from great_expectations.execution_engine import PandasExecutionEngine
from great_expectations.expectations.expectation import ColumnMapExpectation
from great_expectations.expectations.metrics.map_metric_provider import (ColumnMapMetricProvider,
                                                                         column_condition_partial)


class ColumnValuesListItemsInSet(ColumnMapMetricProvider):
    """Per row: whether every item of the cell's list is in ``value_set`` (an empty list is)."""

    condition_metric_name = "column_values.list_items_in_set"
    condition_value_keys = ("value_set",)

    @column_condition_partial(engine=PandasExecutionEngine)
    def _pandas(cls, column, value_set, **kwargs):
        allowed = set(value_set)
        return column.map(lambda items: all(item in allowed for item in items))


class ExpectColumnListItemsToBeInSet(ColumnMapExpectation):
    """Expect every item of the list in each (non-null) cell of ``column`` to be in ``value_set``.

    Args:
        column (str): a column of lists.
        value_set (list): the allowed items (hashable; ``1 == True`` as in Python).
        mostly (float): the share of rows that must pass (default 1).
    """

    value_set: list[Any]

    map_metric = "column_values.list_items_in_set"
    args_keys = ("column", "value_set")
    success_keys = ("value_set", "mostly")
