"""Context stages: the rerank judge, context enrichment and contextual compression, between retrieval
and the generator."""
