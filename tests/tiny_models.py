"""Tiny randomly initialised models saved to a folder, so tests load cross-encoders and NLI
models through the real code path (sentence-transformers CrossEncoder) with no weights shipped.

Their scores mean nothing; tests check mechanics: a folder loads, each pair gets a finite score
that equals calling the model directly, labels are read from the config.
"""

from __future__ import annotations

from pathlib import Path

WORDS = ("the a an of to is are why do does when how what cats cat purr purrs dogs bark market stock fell rate "
         "content sleep day queue job jobs retry delay seconds default").split()


def save_tiny_model(folder: Path, labels: list[str] | None = None, seed: int = 0) -> Path:
    """A 2-layer BERT with a classification head: one output (a cross-encoder) when ``labels``
    is None, else one per label with ``id2label`` set (an NLI model)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *"abcdefghijklmnopqrstuvwxyz"]
    (folder / "vocab.txt").write_text("\n".join(vocab), encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"))
    extra = {} if labels is None else {"id2label": dict(enumerate(labels)),
                                       "label2id": {name: index for index, name in enumerate(labels)}}
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=256, num_labels=1 if labels is None else
                        len(labels), initializer_range=0.5, **extra)  # wide weights: scores that differ
    torch.manual_seed(seed)
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
