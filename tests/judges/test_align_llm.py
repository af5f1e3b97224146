"""Aligning an LLM judge with examples of its mistakes (``align_llm``), over real HTTP to the scripted
server: the prompts it received carry the examples of the other folds only, the variant names itself by its
content, its judgements are cached under it, and the default judge's answers are reused as they were."""
import json
import re

import pytest

from rag_eval.assets.resources import JudgeResource
from rag_eval.metrics import score_sample
from rag_eval.metrics.core.samples import load_samples
from rag_eval.metrics.errors import SettingsError
from rag_eval.metrics.judges.align import labelled_rows
from rag_eval.metrics.judges.align_llm import align_examples
from rag_eval.metrics.judges.base import JudgeError
from rag_eval.metrics.judges.examples import END, Example, Examples, read_variant
from rag_eval.orchestration.judge_sim import oracle
from rag_eval.orchestration.judge_sim_command import Simulation, simulated

pytestmark = pytest.mark.slow  # the test server in every test

NAMES = ["Alpha", "Beta", "Gamma", "Delta", "Epsilon", "Zeta", "Eta", "Theta", "Iota", "Kappa", "Lambda", "Mu"]
ROWS = [{"id": f"r{i}", "user_input": f"How long is bridge {n}?", "response": f"Bridge {n} is {i + 3} metres long.",
         "retrieved_contexts": [f"Bridge {n} spans {i + 3} metres of river."]} for i, n in enumerate(NAMES)]
#: Rows 0-9 labelled, 2, 5 and 8 failing; the server's judge (every verdict 1) gets those three wrong.
LABELS = {f"r{i}": 0.0 if i in (2, 5, 8) else 1.0 for i in range(10)}


def judged_part(prompt: str) -> tuple[str, list[str]]:
    """The row a statement_support prompt judges (its statement) and the statements of its examples."""
    examples, _, task = prompt.rpartition(END)
    [statement] = re.findall(r"^\[S1\] (.*)$", task, re.M)
    return statement, re.findall(r"^\[S\d+\] (.*)$", examples, re.M)


def statement(i: int) -> str:
    return ROWS[i]["response"]


def test_each_row_is_judged_with_examples_of_the_other_folds_only(server, make_judge):
    samples = load_samples(ROWS)
    judge = make_judge()
    result = align_examples(samples, LABELS, judge, k=4, folds=2, source="bridges")
    # The default judge says 1.0 everywhere: 7 of 10 labels agree, and so they do with the examples
    # (the server does not read them): no change, said as it is.
    for agreement in (result.before, result.after):
        assert (agreement.auroc, agreement.accuracy, agreement.mae) == (0.5, 0.7, pytest.approx(0.3))
    assert (result.labelled, result.scored) == (10, 12)
    assert result.interval_after == result.interval_before and result.interval_before.n == 10  # the same scores

    folds = [{int(i) for i in fold} for fold in labelled_rows(samples, LABELS, judge, folds=2).folds]
    assert sorted(folds[0] | folds[1]) == list(range(10)) and not folds[0] & folds[1]
    requests = [judged_part(seen.prompt) for seen in server.chat_requests()]
    assert sorted(s for s, examples in requests[:12] if not examples) == sorted(statement(i) for i in range(12))
    expected = 12
    for fold in folds:
        shown = [statement(i) for i in (2, 5, 8) if i not in fold]  # the others' mistakes, in row order
        asked = [examples for s, examples in requests[12:] if s in {statement(i) for i in fold}]
        assert asked == ([shown] * len(fold) if shown else [])  # no example: the default judge's cached answer
        expected += (len(fold) + 2) if shown else 0  # the fold's rows and the two unlabelled ones
    assert len(requests) == expected
    # Never a row's own example in its own prompt.
    assert all(s not in examples for s, examples in requests)

    model = result.model
    assert model["kind"] == "llm_examples" and model["name"] == "aligned"
    assert [e["statements"] for e in model["examples"]] == [[statement(i)] for i in (2, 5, 8)]
    assert [(e["label"], e["judged"]) for e in model["examples"]] == [(0.0, 1.0)] * 3
    assert model["examples"][0]["contexts"] == ROWS[2]["retrieved_contexts"]
    assert model["trained_on"] == "3 of the 3 rows llm:judge-test got wrong among 10 faithfulness labels of bridges"
    before = len(server.chat_requests())
    again = align_examples(samples, LABELS, judge, k=4, folds=2, source="bridges")
    assert again.model == model and len(server.chat_requests()) == before  # everything from the cache
    capped = align_examples(samples, LABELS, judge, k=2, folds=2)
    assert [e["statements"] for e in capped.model["examples"]] == [[statement(2)], [statement(5)]]


def test_a_judge_without_mistakes_and_bad_arguments_are_refused(server, make_judge):
    fails = {statement(i) for i in (2, 5, 8)}
    server.script = lambda seen: oracle(lambda field, key: int(judged_part(seen.prompt)[0] not in fails))(seen)
    samples = load_samples(ROWS)
    with pytest.raises(ValueError, match="agrees with all 10 labels: there is no mistake"):
        align_examples(samples, LABELS, make_judge(), folds=2)
    with pytest.raises(ValueError, match="k \\(examples\\) must be at least 1"):
        align_examples(samples, LABELS, make_judge(), k=0)


def test_the_variant_file_its_prompts_and_its_cache_keys(server, make_judge, tmp_path):
    examples = Examples([Example(("Bridge Nu is 9 metres long.",), ("Bridge Nu spans 90 metres.", "x" * 2000), 0.0, 1.0)])
    path = tmp_path / "aligned.json"
    path.write_text(json.dumps(examples.model(script="test")), encoding="utf-8")
    variant = read_variant(path)
    assert isinstance(variant, Examples) and variant.label == examples.label == f"aligned-{examples.version}"
    default, aligned = make_judge(), make_judge().with_examples(variant)
    assert aligned.name == f"llm:judge-test+{variant.label}" and aligned.describe()["examples"] == variant.label
    assert "examples" not in default.describe()
    resource = dict(base_url=server.url, model="judge-test", cache_path=str(tmp_path / "cache.sqlite"))
    assert JudgeResource(**resource, verifier=str(path)).code_version() == f"llm:judge-test+{variant.label}"
    assert JudgeResource(**resource, verifier=str(path)).get_judge().name == aligned.name
    assert JudgeResource(**resource).code_version() == "llm:judge-test"

    assert score_sample(ROWS[0], ["faithfulness"], judge=default)["faithfulness"].value == 1.0
    assert score_sample(ROWS[0], ["faithfulness"], judge=aligned)["faithfulness"].value == 1.0
    plain, shown = (seen.prompt for seen in server.chat_requests())
    assert shown == variant.prefix + plain  # the examples, then the default prompt unchanged
    assert "[S1] Bridge Nu is 9 metres long." in shown and "The person's label: 0.00" in shown
    assert "x" * 1470 in shown and "x" * 1480 not in shown  # contexts cut to 1500 characters in all
    for judge in (default, aligned, make_judge().with_examples(read_variant(path))):  # all from the cache
        score_sample(ROWS[0], ["faithfulness"], judge=judge)
    assert len(server.chat_requests()) == 2

    edited = json.loads(path.read_text(encoding="utf-8"))
    edited["examples"][0]["label"] = 0.5
    path.write_text(json.dumps(edited), encoding="utf-8")
    assert read_variant(path).version != variant.version  # named by content, whatever the file says
    for broken, message in (({"kind": "llm_examples", "examples": [{"label": 1}]}, "not an LLM judge's examples file"),
                            ({"kind": "llm_examples", "examples": []}, "no example"),
                            ({"kind": "llm_examples", "examples": [{**edited["examples"][0], "statements": "Bridge"}]},
                             "statements and contexts are lists"),
                            ({"kind": "llm_examples", "examples": [{**edited["examples"][0], "label": 2}]},
                             "label and judged must be numbers in \\[0, 1\\]")):
        path.write_text(json.dumps(broken), encoding="utf-8")
        with pytest.raises(SettingsError, match=message):
            read_variant(path)


def test_a_row_the_llm_judge_cannot_judge_stops_align_and_is_never_dropped(server, make_judge):
    # Every chat answer cut in half: each row a judge_error after the retries, never "not measured".
    server.script = simulated(Simulation(malformed=1.0))
    with pytest.raises(JudgeError, match=r"^12 of 12 rows could not be judged \(.*\); run align again"):
        align_examples(load_samples(ROWS), LABELS, make_judge(), k=4, folds=2)
