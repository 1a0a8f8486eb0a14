"""How much of a chunk an embedder reads: the bundled MiniLM embeds the first ``max_seq_length``
(256) of its own word pieces, [CLS] and [SEP] included, and drops the rest, whichever runtime
runs it (sentence-transformers truncates as the ONNX encoder's tokenizer does). A chunk longer
than that is searched by dense retrieval on its start alone while bm25 reads all of it, so a
chunk-size comparison under dense retrieval is partly a truncation comparison: the dry run counts
such chunks per embedder (``longer_than_window``).

Counted with the ONNX encoder's own tokenizer (``onnx_minilm.shipped_tokenizer``), truncation
off. Other embedders (a local Hugging Face folder, Ollama, OpenAI-compatible servers) have windows
ragkit does not know: not counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# The embedders that run the shipped all-MiniLM-L6-v2 (minilm on either runtime, minilm-onnx at
# either precision): one tokenizer and one window.
SHIPPED_MINILM = frozenset({"minilm", "minilm-onnx"})


@dataclass(frozen=True)
class WindowCount:
    """``longer`` of ``texts`` texts have more word pieces than the embedder's ``window``."""

    longer: int
    texts: int
    window: int


def longer_than_window(embedder_type: str, texts: Sequence[str]) -> WindowCount | None:
    """How many of ``texts`` the embedder cuts short; None for an embedder whose window is unknown."""
    if embedder_type not in SHIPPED_MINILM:
        return None
    from ragkit.embedders.onnx_export import max_seq_length, shipped_model_folder
    from ragkit.embedders.onnx_minilm import shipped_tokenizer

    folder = shipped_model_folder()
    window = max_seq_length(folder)
    tokenizer = shipped_tokenizer(folder, window)  # the encoder's own tokenizer
    tokenizer.no_truncation()  # here every piece counts
    lengths = [len(encoding.ids) for encoding in tokenizer.encode_batch(list(texts))] if texts else []
    return WindowCount(longer=sum(length > window for length in lengths), texts=len(lengths), window=window)


def window_note(embedder_type: str, count: WindowCount | None) -> str | None:
    """The dry run's words for ``count``: None when nothing is cut short or nothing was counted."""
    if count is None or count.longer == 0:
        return None
    return (f"{count.longer} of {count.texts} chunk texts are longer than {embedder_type}'s {count.window}-token "
            f"window: dense retrieval reads only their first {count.window} tokens (bm25 reads all)")
