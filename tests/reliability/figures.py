"""The figures of issue 30's closing table, printed by the reliability tests as they measure them
(``pytest -s tests/reliability | grep '^fault-table'``): one line a fault, tab-separated."""

HEADER = ("fault", "what the user saw", "rows lost", "paid judgements lost", "duplicate requests", "in flight")


def fault_row(fault: str, seen: str, rows_lost: int, paid_lost: int, duplicates: int, in_flight: int) -> None:
    """Print one row of the table (the user's line as printed, on one line)."""
    print("\nfault-table", fault, " ".join(seen.split()), rows_lost, paid_lost, duplicates, in_flight, sep="\t")
