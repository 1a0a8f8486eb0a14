"""Context stages: the rerank judge and context enrichment, between retrieval and the generator."""
