"""Azure AI Evaluation's RAG evaluators: Likert judges and GroundednessPro."""
