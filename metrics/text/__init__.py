"""Deterministic text helpers shared by the metrics and both judges, framework-free:

* :mod:`metrics.text.sentences`: sentence segmentation (Latin, CJK, Devanagari, Arabic) and the
  normalisation of RAG text (citation markers, Markdown, HTML);
* :mod:`metrics.text.tokens`: content tokens, numbers, quantities and names, the lexical
  evidence of the offline rules;
* :mod:`metrics.text.answers`: short answers and statements (bare spans, yes/no, the
  ``"Q: … A: …"`` form, evasive sentences, restated questions, answer kinds);
* :mod:`metrics.text.memos`: the bounded memos of these pure functions.
"""
from metrics.text.answers import (answer_kind_missed, is_bare_span, is_noncommittal, is_polar_question, qa_statement,
                                  restates, split_qa, statements, yes_no)
from metrics.text.memos import MEMO_SIZE, forget_memos, memo
from metrics.text.sentences import has_cjk, join_lines, normalise_rag_text, split_sentences
from metrics.text.tokens import (STOPWORDS, approximate_numbers, content_tokens, names, normalise_number, numbers,
                                 quantities, same_number, stem)

__all__ = ["MEMO_SIZE", "STOPWORDS", "answer_kind_missed", "approximate_numbers", "content_tokens", "forget_memos",
           "has_cjk", "is_bare_span", "is_noncommittal", "is_polar_question", "join_lines", "memo", "names",
           "normalise_number", "normalise_rag_text", "numbers", "qa_statement", "quantities", "restates", "same_number",
           "split_qa", "split_sentences", "statements", "stem", "yes_no"]
