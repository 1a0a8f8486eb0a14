"""How much of a chunk the bundled MiniLM reads: texts longer than its 256 word pieces ([CLS] and
[SEP] included) are counted, on a hand-built table cross-checked with transformers' pure-Python
BertTokenizer (another implementation of the same vocabulary), and the dry run names them."""

from __future__ import annotations

import pytest

from ragkit.embedders.onnx_export import shipped_model_folder
from ragkit.embedders.window import longer_than_window, window_note
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.estimate import dry_run, format_estimate
from tests.factories import TINY_DOCS, tiny_experiment, write_beir

# "cat" is one word piece: n of them are n + 2 tokens with [CLS] and [SEP].
TABLE = [
    ("", False),
    ("cat", False),
    ("cat " * 254, False),  # 256 tokens: exactly the window
    ("cat " * 255, True),  # 257
    ("cat " * 600, True),
    ("Tables, hyphen- ated words and numbers 1,234.5 " * 40, True),  # ~13 pieces x 40
    ("Tables, hyphen- ated words and numbers 1,234.5 " * 10, False),
]


def test_texts_longer_than_the_window_are_counted_as_an_independent_tokenizer_counts_them():
    from transformers import BertTokenizer

    texts = [text for text, _ in TABLE]
    count = longer_than_window("minilm", texts)
    assert count is not None and (count.texts, count.window) == (len(TABLE), 256)
    assert count.longer == sum(longer for _, longer in TABLE) == 3
    slow = BertTokenizer.from_pretrained(str(shipped_model_folder()))  # pure Python, no Rust tokenizers
    assert [len(slow(text)["input_ids"]) > 256 for text in texts] == [longer for _, longer in TABLE]
    assert longer_than_window("minilm-onnx", texts) == count  # one model, one window


def test_an_embedder_whose_window_is_unknown_is_not_counted_and_nothing_is_said():
    assert longer_than_window("ollama", ["cat " * 600]) is None
    assert window_note("ollama", None) is None
    assert window_note("minilm", longer_than_window("minilm", ["cat"])) is None
    assert window_note("minilm", longer_than_window("minilm", ["cat " * 300, "cat"])) == (
        "1 of 2 chunk texts are longer than minilm's 256-token window: dense retrieval reads only their "
        "first 256 tokens (bm25 reads all)")


@pytest.mark.integration
def test_the_dry_run_names_the_chunks_minilm_cuts_short(tmp_path, isolated_data_dir):
    dataset = write_beir(tmp_path / "beir", docs={**TINY_DOCS, "long": "cat " * 400})  # whole documents, one long
    config = config_from_dict(tiny_experiment(dataset, embedders=["minilm"], retrievers=["dense"], top_k=[1]))
    estimate = dry_run(config, tmp_path / "out", calibrate_first=False)
    (embedding,) = estimate.embedding
    assert embedding.window is not None and embedding.window.startswith(f"1 of {embedding.to_embed} chunk texts")
    assert f"  note: {embedding.window}" in format_estimate(estimate).splitlines()
