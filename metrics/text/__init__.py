"""Deterministic text helpers shared by the metrics and both judges, framework-free:

* :mod:`rag_eval.metrics.text.sentences`: sentence segmentation (Latin, CJK, Devanagari, Arabic) and the
  normalisation of RAG text (citation markers, Markdown, HTML);
* :mod:`rag_eval.metrics.text.tokens`: content tokens, numbers, quantities and names, the lexical
  evidence of the offline rules;
* :mod:`rag_eval.metrics.text.answers`: short answers and statements (bare spans, yes/no, the
  ``"Q: … A: …"`` form, evasive sentences, restated questions, answer kinds);
* :mod:`rag_eval.metrics.text.memos`: the bounded memos of these pure functions.
"""
from rag_eval.metrics.text.answers import (answer_kind_missed, is_bare_span, is_noncommittal, is_polar_question, qa_statement,
                                  restates, split_qa, statements, yes_no)
from rag_eval.metrics.text.memos import MEMO_SIZE, forget_memos, memo
from rag_eval.metrics.text.sentences import has_cjk, join_lines, normalise_rag_text, split_sentences
from rag_eval.metrics.text.tokens import (STOPWORDS, approximate_numbers, content_tokens, names, normalise_number, numbers,
                                 quantities, same_number, stem)

__all__ = ["MEMO_SIZE", "STOPWORDS", "answer_kind_missed", "approximate_numbers", "content_tokens", "forget_memos",
           "has_cjk", "is_bare_span", "is_noncommittal", "is_polar_question", "join_lines", "memo", "names",
           "normalise_number", "normalise_rag_text", "numbers", "qa_statement", "quantities", "restates", "same_number",
           "split_qa", "split_sentences", "statements", "stem", "yes_no"]
