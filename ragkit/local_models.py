"""Cross-encoder and NLI models from local folders (sentence-transformers ``CrossEncoder``).

Like the ``huggingface`` embedder, a model is a folder on this machine: nothing is downloaded
(``HF_HUB_OFFLINE``). No PyPI package ships cross-encoder or NLI weights for offline use, so a
user saves one (e.g. ``cross-encoder/ms-marco-MiniLM-L-6-v2``, ``cross-encoder/nli-deberta-v3-
xsmall``) and points ``model_path`` at it. Each folder is loaded once per process.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np


class ModelFolderError(ValueError):
    """A model folder that is missing or is not the kind of model asked for (a user error)."""


def _folder(path: str, owner: str, field: str) -> str:
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ModelFolderError(f"{owner}: {field} {folder} is not a folder; ragkit loads models from local "
                               "folders only (save the model there first)")
    return str(folder.resolve())


@lru_cache(maxsize=8)
def _cross_encoder(folder: str) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from sentence_transformers import CrossEncoder  # heavy import: only runs that use a model pay it

    try:
        return CrossEncoder(folder, device="cpu")
    except (OSError, ValueError) as error:
        raise ModelFolderError(f"{folder} does not hold a cross-encoder model: {error}") from None


def cross_encoder_scores(path: str, query: str, texts: Sequence[str], owner: str = "rerank",
                         field: str = "model_path") -> list[float]:
    """The model's relevance score of each text for the query (higher is more relevant)."""
    if not texts:
        return []
    model = _cross_encoder(_folder(path, owner, field))
    scores = model.predict([(query, text) for text in texts], show_progress_bar=False)
    return [float(score) for score in np.asarray(scores, dtype=np.float64).reshape(len(texts), -1)[:, 0]]


def entailment_label(config: Any) -> int:
    """The index of the entailment class in an NLI model's ``id2label``."""
    labels = {int(index): str(name) for index, name in (getattr(config, "id2label", None) or {}).items()}
    found = [index for index, name in labels.items() if "entail" in name.lower()]
    if len(found) != 1:
        raise ModelFolderError(f"not an NLI model: its labels {sorted(labels.values())} name no single "
                               "entailment class (expected e.g. contradiction / entailment / neutral)")
    return found[0]


def entailment_probabilities(path: str, pairs: Sequence[tuple[str, str]], owner: str = "groundedness",
                             field: str = "nli_model_path") -> list[float]:
    """P(entailment) of each (premise, hypothesis) pair, a softmax over the model's classes."""
    if not pairs:
        return []
    model = _cross_encoder(_folder(path, owner, field))
    entail = entailment_label(getattr(model, "config", None) or model.model.config)
    logits = np.asarray(model.predict(list(pairs), show_progress_bar=False, activation_fn=_identity),
                        dtype=np.float64).reshape(len(pairs), -1)
    if logits.shape[1] < 2:
        raise ModelFolderError(f"{path} has a single output: a cross-encoder, not an NLI model")
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return [float(p) for p in (shifted / shifted.sum(axis=1, keepdims=True))[:, entail]]


def _identity(values: Any) -> Any:
    return values
