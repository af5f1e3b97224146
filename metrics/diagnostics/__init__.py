"""RAGChecker's claim-level diagnostics: which part of a RAG system to fix, the retriever or the generator.

Ru et al., "RAGChecker: A Fine-grained Framework for Diagnosing Retrieval-Augmented Generation",
NeurIPS 2024 Datasets & Benchmarks (amazon-science/RAGChecker, ``ragchecker/computation.py``). Every
metric is computed from one matrix of claim × premise entailment verdicts per row
(:mod:`rag_eval.metrics.diagnostics.claims`, the checks asked once and shared):

* ``overall``: :mod:`~rag_eval.metrics.diagnostics.overall` — claim precision, recall and F1 of the response
  against the reference;
* ``retriever``: :mod:`~rag_eval.metrics.diagnostics.retriever` — claim recall and context precision;
* ``generator``: :mod:`~rag_eval.metrics.diagnostics.generator` — context utilization, hallucination,
  self-knowledge, faithfulness, and RAGAS's noise sensitivity in relevant and irrelevant chunks
  (``rag_eval.metrics.rag.noise_sensitivity``: RAGAS took RAGChecker's formula; one metric, in both selections).

``rag_eval.metrics.reports.diagnosis`` reads a version's results as a diagnosis: the groups, the largest
problem in one line, and the worst rows with the claims that failed.
"""
