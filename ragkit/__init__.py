"""ragkit: compare RAG configurations on real data, offline by default."""

__version__ = "0.1.0"
