"""Rules 6 of the offline judge: a changed magnitude, a negation, a substituted word and an
unsupported universal claim make a sentence unsupported; support by any one passage; a span of
another kind than the question asks for, and a restatement padded with vague words, score 0 on
answer_relevancy. Each case is worked by hand from the texts (the verdict and the word the reason
names)."""
import json
import random
from pathlib import Path

import pytest

from rag_eval.metrics import OfflineJudge, score_sample
from rag_eval.metrics.judges.base import Verdict
from rag_eval.metrics.judges.claim_rules import claim_text
from rag_eval.metrics.text import normalise_rag_text, split_sentences
from tests.judges.ruled import ruled

pytestmark = pytest.mark.slow  # the offline encoder

REVENUE = "The company reported revenue of $5 million in 2023."
CURIE = "Marie Curie won the Nobel Prize in Physics in 1903."
SEMMERING = ("The Semmering railway in Austria was the first mountain railway in Europe built with a standard "
             "gauge track.")
BROOKS = ("Friends in Low Places is a song performed by Garth Brooks. It was released as the lead single from his "
          "album No Fences.")


@pytest.fixture(scope="module")
def judge():
    return OfflineJudge()


def verdict(judge, statement, context):
    """The rules' own verdict on ``statement`` (``rule_verdict``: what these tests are about), with
    their reason and evidence; the verifier's probability is tested in test_verifier.py."""
    graded = judge.run(judge.support([statement], [context]))[0]
    return Verdict(graded.evidence["rule_verdict"], graded.reason, graded.evidence)


def test_magnitude_word_changes_the_number(judge):
    # "$5 billion" is 5000000000, the context says 5000000: absent; the same magnitude is supported.
    wrong = verdict(judge, "The company reported revenue of $5 billion in 2023.", REVENUE)
    assert (wrong.verdict, wrong.evidence["absent"]) == (0, ["5000000000"])
    assert verdict(judge, "The company reported revenue of $5 million in 2023.", REVENUE).verdict == 1
    assert verdict(judge, "The company reported revenue of $5,000,000 in 2023.", REVENUE).verdict == 1


def test_negation_against_an_affirmation(judge):
    # "did not win the Nobel …" denies (win, nobel); the passage says "won" (win) and "Nobel" without denying.
    denied = verdict(judge, "Marie Curie did not win the Nobel Prize in Physics.", CURIE)
    assert (denied.verdict, denied.evidence["negated"]) == (0, "nobel win")
    assert verdict(judge, "Marie Curie won the Nobel Prize in Physics.", CURIE).verdict == 1
    # the other way round: the passage denies what the statement affirms
    assert verdict(judge, CURIE, "Marie Curie did not win the Nobel Prize in Physics in 1903.").verdict == 0


def test_not_only_is_no_negation(judge):
    assert verdict(judge, "Marie Curie won not only the Nobel Prize in Physics.", CURIE).evidence.get("negated") is None


def test_substituted_word_between_the_same_neighbours(judge):
    # "narrow" is in no context; the context has "a standard gauge" where the statement has "a narrow gauge".
    changed = verdict(judge, "The Semmering railway was built with a narrow gauge track.", SEMMERING)
    assert (changed.verdict, changed.evidence["substituted"]) == (0, ["narrow", "standard"])
    assert verdict(judge, "The Semmering railway was built with a standard gauge track.", SEMMERING).verdict == 1


def test_a_number_changed_after_the_same_words(judge):
    # "1953" stands in the context (the draft), but after "Heisman Trophy in" the context says 1952: the
    # statement's number is another one in the same place (supported before: both numbers in one passage).
    context = ("The first draft the Colts took part in was in 1953, when they picked halfback Billy Vessels. He "
               "played for Oklahoma and won the Heisman Trophy in 1952.")
    changed = verdict(judge, "Billy Vessels won the Heisman Trophy in 1953.", context)
    assert (changed.verdict, changed.evidence["substituted"]) == (0, ["1953", "1952"])
    assert verdict(judge, "Billy Vessels won the Heisman Trophy in 1952.", context).verdict == 1
    assert verdict(judge, "The Colts took part in their first draft in 1953.", context).verdict == 1


def test_universal_claim_needs_a_universal_passage(judge):
    # "all the songs": no passage says all/every/only; the song itself is supported.
    overclaim = verdict(judge, "Garth Brooks performed all the songs on the album No Fences.", BROOKS)
    assert (overclaim.verdict, overclaim.evidence["universal"]) == (0, "all")
    assert verdict(judge, "Garth Brooks performed the song Friends in Low Places.", BROOKS).verdict == 1


def test_supported_by_a_passage_other_than_the_most_similar():
    # FiQA row 1 of the example: the sentence most similar to the statement lacks "associate" and
    # "issued", but a passage further on (with its neighbours) holds every content word together.
    row = json.loads((Path(__file__).parents[2] / "examples" / "fiqa" / "samples.jsonl").read_text().splitlines()[0])
    judge = OfflineJudge()
    statement = ("The best way to deposit a cheque issued to an associate in your business into your business "
                 "account is to open a business account with the bank.")
    got = judge.run(judge.support([statement], row["retrieved_contexts"]))[0]
    assert got.evidence["rule_verdict"] == 1 and "borrowed" not in got.evidence


def test_a_common_noun_for_a_name_is_no_substitution(judge):
    # "the museum holds" against "the Louvre holds": a name in other words, not a changed word.
    assert verdict(judge, "The museum holds the Mona Lisa.", "The Louvre holds the Mona Lisa.").verdict == 1


@pytest.mark.parametrize("question, answer, value, reason", [
    ("How many majors does the university offer?", "Delhi", 0.0,
     "off the question: it asks for a number, the answer is not one"),
    ("谁刺杀了林肯？", "1865年", 0.0, "off the question: it asks for a name, the answer is not one"),
])
def test_a_span_of_another_kind_is_off_the_question(judge, question, answer, value, reason):
    result = score_sample({"user_input": question, "response": answer}, ["answer_relevancy"], judge=judge)
    assert (result["answer_relevancy"].value, result["answer_relevancy"].reason) == (value, reason)
    right = "85" if "majors" in question else "约翰·威尔克斯·布斯"
    assert score_sample({"user_input": question, "response": right}, ["answer_relevancy"],
                        judge=judge)["answer_relevancy"].value > 0.5


@pytest.mark.parametrize("question, wrong, right", [
    # A person and a place are no boiling point, whatever their cosine with the question (0.76 and 0.78
    # before); the answer, bare or as a sentence, keeps its cosine (0.82 and 0.80 measured).
    ("What is the boiling point of ethanol?", ("Marie Curie.", "Paris."), ("78.37 °C", "Ethanol boils at 78.37 °C.")),
    ("乙醇的沸点是多少？", ("居里夫人。", "巴黎。"), ("78.37摄氏度", "乙醇的沸点是78.37摄氏度。")),
    ("Where was Marie Curie born?", ("1867",), ("Warsaw",)),
])
def test_an_entity_of_the_wrong_type_scores_low_on_answer_relevancy(judge, question, wrong, right):
    def relevancy(response):
        return score_sample({"user_input": question, "response": response}, ["answer_relevancy"],
                            judge=judge)["answer_relevancy"]

    kind = "a place" if question.startswith("Where") else "a number"
    for response in wrong:
        assert (relevancy(response).value, relevancy(response).reason) == (
            0.0, f"off the question: it asks for {kind}, the answer is not one")
    assert all(relevancy(response).value > 0.6 for response in right)


def test_azure_relevance_rates_a_span_of_another_kind_1(judge):
    result = score_sample({"user_input": "How many majors does the university offer?", "response": "Delhi"},
                          ["relevance"], judge=judge)["relevance"]
    assert result.value == 1


@pytest.mark.parametrize("question, response, evasive", [
    # vague words add nothing to a restated question
    ("When was the Eiffel Tower completed?", "The Eiffel Tower was completed at some point.", True),
    ("When was the Eiffel Tower completed?", "That is a good question about when the Eiffel Tower was completed.",
     True),
    ("When was the Eiffel Tower completed?", "The Eiffel Tower was completed in 1889.", False),
    # restating a yes/no question's claim affirms it: an answer (it scored 0 as evasive before)
    ("Is the Eiffel Tower made of iron?", "The Eiffel Tower is made of iron.", False),
    ("Are Pam Veasey and Jon Jost both American?", "Pam Veasey and Jon Jost are both American.", False),
])
def test_restating_the_question(judge, question, response, evasive):
    result = score_sample({"user_input": question, "response": response}, ["answer_relevancy"],
                          judge=judge)["answer_relevancy"]
    assert (result.reason == "the response is noncommittal or evasive") is evasive
    assert (result.value == 0.0) is evasive


def test_a_common_word_is_not_said_by_a_name_holding_it():
    # "brother" stands in the context only inside the title "Band of Brothers": no evidence for it.
    context = ('Peter O\'Meara came to the screen in the HBO series "Band of Brothers" playing 1st Lt Norman Dike. '
               'Dike was portrayed in the miniseries by Peter O\'Meara.')
    question = "What is the connection between Peter O'Meara and Norman Dike?"
    got = {answer: ruled(score_sample({"user_input": question, "response": answer, "retrieved_contexts": [context]},
                                      ["faithfulness"])["faithfulness"])
           for answer in ("Peter O'Meara played Norman Dike's brother.", "Band of Brothers")}
    assert got == {"Peter O'Meara played Norman Dike's brother.": 0.0, "Band of Brothers": 1.0}


def test_a_remembered_support_call_gives_each_caller_its_own_verdicts(judge):
    # The same call twice is judged once (recall and precision of a one-context row ask the same):
    # equal verdicts, but changing one caller's evidence leaves the other's and the next caller's alone.
    first = verdict(judge, "The company reported revenue of $5 billion in 2023.", REVENUE)
    first.evidence["absent"].append("changed by a caller")
    second = verdict(judge, "The company reported revenue of $5 billion in 2023.", REVENUE)
    assert (second.verdict, second.evidence["absent"]) == (0, ["5000000000"])
    assert second is not first


# ---------------------------------------------------------------- a chunk's line breaks change no verdict
EVEREST = ("The first ascent of Mount Everest was made by Edmund Hillary and Tenzing Norgay\n\non 29 May 1953 during "
           "the ninth British expedition.")
HALUEVAL = [json.loads(line) for line in
            (Path(__file__).parents[1] / "data" / "halueval_qa" / "rows_000_029.jsonl").read_text().splitlines()]


def faithfulness(judge, response, context, question="What happened?"):
    return score_sample({"user_input": question, "response": response, "retrieved_contexts": [context]},
                        ["faithfulness"], judge=judge)["faithfulness"]


def test_a_sentence_copied_from_a_chunk_is_supported_across_its_paragraph_break(judge):
    # The names stand in the first paragraph, the date in the second: one sentence of one chunk. Before, no
    # passage held the names with "29 May 1953" ("never appear together in one passage": 0.0).
    statement = " ".join(EVEREST.split())
    assert ruled(faithfulness(judge, statement, EVEREST)) == 1.0
    assert ruled(faithfulness(judge, statement, statement)) == 1.0


def test_paragraph_breaks_inserted_into_real_passages_change_no_verbatim_sentence(judge):
    # HaluEval knowledge passages (rows 0-29): each sentence copied word for word is judged against its
    # passage as written and with blank lines put in at two seeded random spaces; its faithfulness is
    # the same, and it is 1.0 (a verbatim sentence). Before, 25 of the 75 sentences changed with the breaks, and
    # one ("Group 3E Series Production Cars": "3E" read as the name word "E") scored 0.0 as written.
    rng = random.Random(26)
    changed = []
    for row in HALUEVAL:
        passage = normalise_rag_text(row["knowledge"])
        spaces = [i for i, ch in enumerate(passage) if ch == " "]
        cuts = sorted(rng.sample(spaces, 2))
        broken = "".join("\n\n" if i in cuts else ch for i, ch in enumerate(passage))
        for sentence in split_sentences(passage):
            scores = (ruled(faithfulness(judge, sentence, passage)), ruled(faithfulness(judge, sentence, broken)))
            if scores != (1.0, 1.0):
                changed.append((row["id"], sentence, scores))
    assert changed == []


# ---------------------------------------------------------------- bare yes/no to a comparison question
WRITERS = ("Patrick Victor Martindale White (1912-1990) was an Australian writer. Katherine Anne Porter (1890-1980) "
           "was an American journalist and short story writer.")
DIRECTORS = ("Carl Boese (1887-1958) was a German film director, screenwriter and producer. Franco Zeffirelli "
             "(1923-2019) was an Italian director and producer of operas, films and television.")


@pytest.mark.parametrize("question, context, claim, holds", [
    # "White" is the surname the context writes after two middle names, not a word of the claim (it was
    # taken for one, and no passage held Porter with "white": "yes" scored 0.0).
    ("Are Patrick White and Katherine Anne Porter both writers?", WRITERS,
     "Patrick White and Katherine Anne Porter are both writers", True),
    ("Are Patrick White and Katherine Anne Porter both painters?", WRITERS,
     "Patrick White and Katherine Anne Porter are both painters", False),
    # "direct" and "produce" are said by "director" and "producer" (a third of the claim was found before).
    ("Did both Carl Boese and Franco Zeffirelli direct and produce films?", DIRECTORS,
     "both Carl Boese and Franco Zeffirelli did direct and produce films", True),
    ("Did both Carl Boese and Franco Zeffirelli compose operas?", DIRECTORS,
     "both Carl Boese and Franco Zeffirelli did compose operas", False),
])
def test_a_bare_yes_or_no_is_judged_on_the_claim_the_question_makes(judge, question, context, claim, holds):
    for answer, expected in (("Yes.", float(holds)), ("No.", float(not holds))):
        result = faithfulness(judge, answer, context, question)
        [statement] = result.details["statements"]
        assert (ruled(result), statement["claim"]) == (expected, claim)
        assert statement["reason"].startswith(f"{answer[:-1].lower()}: the question's claim {claim!r} is "
                                              f"{'' if holds else 'not '}supported")


# ---------------------------------------------------------------- who did it, and names written as names
BEOWULF = "Beowulf is a 2007 film directed by Robert Zemeckis and written by Neil Gaiman and Roger Avary."
ALBUM = "When I Was Born for the 7th Time is an album by the band Cornershop, released on 8 September 1997 by Wiiija."
INSTAGRAM = "Meta acquired Instagram in April 2012. Facebook bought Instagram for $1 billion in 2012."


@pytest.mark.parametrize("question, answer, context, expected, reason", [
    # The question asks who directed: the context names Zemeckis for it, and Gaiman, in the same sentence,
    # for the writing (both answers were supported before).
    ("Who directed the 2007 film Beowulf?", "Robert Zemeckis", BEOWULF, 1.0, None),
    ("Who directed the 2007 film Beowulf?", "Neil Gaiman", BEOWULF, 0.0,
     "contradicted: the contexts name Robert Zemeckis for 'directed', not Neil Gaiman"),
    # "released on 8 September 1997 by Wiiija": the band of the same sentence did not release it.
    ("Who released the album When I Was Born for the 7th Time?", "Wiiija", ALBUM, 1.0, None),
    ("Who released the album When I Was Born for the 7th Time?", "Cornershop released the album.", ALBUM, 0.0,
     "contradicted: the contexts name Wiiija for 'released', not Cornershop"),
    # Meta is named for "acquired" in a sentence without Facebook: no clash (the context says it otherwise).
    ("Who acquired Instagram?", "Facebook", INSTAGRAM, 1.0, None),
])
def test_an_answer_given_the_role_the_context_gives_another_is_contradicted(judge, question, answer, context,
                                                                              expected, reason):
    result = faithfulness(judge, answer, context, question)
    assert ruled(result) == expected
    assert reason is None or result.details["statements"][0]["reason"].startswith(f"{reason}; support ")


def test_a_sentence_naming_the_wrong_agent_is_contradicted(judge):
    wrong = verdict(judge, "Neil Gaiman directed the 2007 film Beowulf.", BEOWULF)
    assert (wrong.verdict, wrong.evidence["agent"], wrong.evidence["contexts_agent"]) == (
        0, "Neil Gaiman", "Robert Zemeckis")
    assert verdict(judge, "Neil Gaiman wrote the 2007 film Beowulf.", BEOWULF).verdict == 1
    assert verdict(judge, "Robert Zemeckis directed the 2007 film Beowulf.", BEOWULF).verdict == 1


@pytest.mark.parametrize("question, answer, expected", [
    # The answer's name must stand in the context as a name, its words in order: "Remembrance Day" and
    # "Panama City" are not the answers' names (both scored 1.0 before, their words being there).
    ("Which day is observed on 25 April each year?", "Anzac Day", 1.0),
    ("Which day is observed on 25 April each year?", "The Day of Remembrance", 0.0),
    ("Which air force base lies 12 mi east of Panama City?", "Tyndall Air Force Base", 1.0),
    ("Which air force base lies 12 mi east of Panama City?", "Panama City Air Force Base", 0.0),
])
def test_a_short_answer_names_what_the_context_names(judge, question, answer, expected):
    context = ('The phrase "Lest we forget" is spoken at services on Remembrance Day. Anzac Day is observed on '
               "25 April each year. Tyndall Air Force Base is an air base 12 mi east of Panama City, Florida.")
    assert ruled(faithfulness(judge, answer, context, question)) == expected


@pytest.mark.parametrize("question, subjects, claim", [
    ("Are Pam Veasey and Jon Jost both American?", {"pam veasey", "jon jost"},
     "Pam Veasey and Jon Jost are both American"),
    ("Are the New Orleans Outfall Canals the same length as the Augusta Canal?",
     {"new orleans outfall canals", "augusta canal"},
     "the New Orleans Outfall Canals are the same length as the Augusta Canal"),
    ("Is Paris in France?", set(), "Paris in France"),
])
def test_the_claim_of_a_yes_no_question(question, subjects, claim):
    assert claim_text(question, subjects) == claim
