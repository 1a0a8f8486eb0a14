"""Retrievers: LlamaIndex BaseRetriever subclasses over a ragkit ChunkIndex."""
