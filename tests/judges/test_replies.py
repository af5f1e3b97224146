"""The LLM judge's replies are validated by their pydantic models (``rag_eval.metrics.judges.prompts.Reply``):
what is refused and what each refusal says, worked out by hand from the models. Pure: no server."""
import pytest

from rag_eval.metrics.judgements import entities, reference_attribution, statement_support
from rag_eval.metrics.judgements.custom import CustomJudgement, CustomTexts
from rag_eval.metrics.judgements.likert import LikertTexts
from rag_eval.metrics.judgements.likert_groundedness import likert_groundedness
from rag_eval.metrics.judges.prompts import OutputError, example_answer

SUPPORT = statement_support.request(["Paris is in France.", "It has 2 million people."], ["Paris, France."])


def refused(request, reply) -> str:
    with pytest.raises(OutputError) as caught:
        request.validate(reply)
    return str(caught.value)


def test_a_keyed_reply_is_read_in_key_order_its_reasons_optional_other_fields_ignored():
    reply = {"S2": {"verdict": 0, "reason": "no figure", "confidence": 0.9}, "S1": {"verdict": 1}}
    assert SUPPORT.validate(reply) == {"verdicts": [1, 0], "reasons": ["", "no figure"]}


@pytest.mark.parametrize("reply, message", [
    # A string, a float or a boolean is no 0/1 verdict (RAGAS's ContextPrecision counts what comes), though 1.0 == True == 1.
    ({"S1": {"verdict": "1"}, "S2": {"verdict": 1.0}},
     "S1.verdict must be one of [0, 1], got '1'; S2.verdict must be one of [0, 1], got 1.0"),
    ({"S1": {"verdict": True}, "S2": {"verdict": 2}},
     "S1.verdict must be one of [0, 1], got True; S2.verdict must be one of [0, 1], got 2"),
    # A dropped or an added verdict is never zip-truncated (BR-21).
    ({"S1": {"verdict": 1}}, "missing S2"),
    ({"S1": {"verdict": 1}, "S2": {"verdict": 1}, "S3": {"verdict": 1}}, "unexpected key S3"),
    ({"S1": 1, "S2": {"reason": "x"}}, "S1 must be an object with reason, verdict, got 1; missing S2.verdict"),
])
def test_a_bad_keyed_reply_says_which_key_and_what_it_takes(reply, message):
    assert refused(SUPPORT, reply) == message


def test_two_keyed_sections_name_the_section_too():
    request = reference_attribution.request("Q?", ["R one."], ["C one.", "C two."])
    reply = {"statements": {"R1": {"attributed": 1}}, "contexts": {"C1": {"useful": 1}, "C2": {"useful": 5}}}
    assert refused(request, reply) == "contexts.C2.useful must be one of [0, 1], got 5"
    reply["contexts"]["C2"]["useful"] = 0
    assert request.validate(reply) == {"attributed": [1], "attribution_reasons": [""], "useful": [1, 0],
                                       "usefulness_reasons": ["", ""]}


def test_a_likert_score_outside_1_to_5_and_a_blank_entity_are_refused():
    likert = likert_groundedness.request(LikertTexts(query="Q?", response="R.", contexts=["C."]))
    assert refused(likert, {"reason": "x", "score": 7}) == "score must be an integer from 1 to 5, got 7"
    assert likert.validate({"score": 4}) == {"reason": "", "score": 4}
    assert refused(entities.request("Paris."), {"entities": ["Paris", " "]}) == \
        "entities.1 must be a non-empty string, got ' '"


@pytest.mark.parametrize("value", [float("nan"), True, "0.5", 1.5])
def test_a_custom_numeric_value_must_be_a_finite_number_in_its_range(value):
    judgement = CustomJudgement("padding", "numeric", ("response",), "How padded?", bounds=(0.0, 1.0))
    request = judgement.request(CustomTexts(response="R."))
    assert refused(request, {"reason": "x", "value": value}) == f"value must be a number from 0 to 1, got {value!r}"
    assert request.validate({"reason": "x", "value": 1}) == {"reason": "x", "value": 1.0}


def test_a_custom_numeric_judgement_without_bounds_asks_for_any_number():
    # bounds are optional: the request names no range (it raised TypeError unpacking None) and takes any finite number.
    judgement = CustomJudgement("padding", "numeric", ("response",), "How padded?")
    request = judgement.request(CustomTexts(response="R."))
    assert request.prompt.endswith("How padded?\n\nReply the value, a number; give the reason first.")
    assert request.validate({"reason": "x", "value": 42}) == {"reason": "x", "value": 42.0}


def test_a_likert_criterion_reads_a_given_text_and_a_missing_one_is_a_lookup_error():
    texts = LikertTexts(query="Q?", contexts=[])
    assert texts.given("query") == "Q?" and texts.given("contexts") == []
    with pytest.raises(LookupError, match=r"^the response is missing: a Likert criterion reading it lists it"):
        texts.given("response")


def test_the_schema_sent_and_the_model_that_reads_the_reply_agree():
    # The dry run answers every request with an instance of its schema: the model must accept it.
    requests = [SUPPORT, reference_attribution.request("Q?", ["R."], ["C."]), entities.request("Paris."),
                likert_groundedness.request(LikertTexts(query="Q?", response="R.", contexts=["C."]))]
    for request in requests:
        assert request.validate(example_answer(request.schema)), request.kind


def test_a_custom_label_outside_the_set_lists_the_labels():
    judgement = CustomJudgement("kind", "discrete", ("response",), "Which kind?", labels=("a", "b", "c", "d"))
    assert refused(judgement.request(CustomTexts(response="R.")), {"label": "e"}) == \
        "label must be one of ['a', 'b', 'c', 'd'], got 'e'"
