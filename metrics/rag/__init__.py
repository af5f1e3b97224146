"""RAG metrics, one module each."""
