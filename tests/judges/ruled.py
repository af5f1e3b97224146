"""What the offline rules decided for a faithfulness result, before the verifier graded it."""


def ruled(result) -> float:
    """The share of ``result``'s statements the rules support (each statement's ``rule_verdict``):
    the offline faithfulness of rule version 8, which the rules' tests were worked out for."""
    verdicts = [s["rule_verdict"] for s in result.details["statements"]]
    return sum(verdicts) / len(verdicts)
