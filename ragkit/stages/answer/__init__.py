"""Answer stages: the generator, groundedness with its hallucination correction, the answer check."""
