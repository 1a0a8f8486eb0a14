"""How the quality gate scores and ranks its attempts: on one scale, whatever strategy retrieved them.

A retriever's raw scores mean different things per strategy: dense scores are cosines (about
0-1), bm25 scores are unbounded BM25 sums (often 5-20) and hybrid scores are reciprocal-rank
fusions (about 1/60). Within one strategy they order attempts well enough; across strategies a
switch to bm25 would always look best and one to hybrid never. So the gate has two scales
(``QualityGateParams.attempt_scale``):

- ``retriever``: each chunk's own score. Every attempt of a gate that never switches strategy
  comes from the same retriever, so this is one scale there. The default of a gate without
  ``switch_strategy``.
- ``question_overlap``: the share of the question's distinct keywords (no stopwords, plurals
  folded onto the singular) that a chunk contains, in [0, 1]. It is computed from the chunk's
  text and the original question only, the same way for every attempt, so a bm25, dense or
  hybrid attempt, or one retrieved with a reformulated query, is measured alike. The default of
  a gate that switches strategy.

Why lexical overlap and not the cosine between the question and each chunk: dense retrieval
returns exactly the chunks of highest cosine, so a cosine scale would make a dense attempt
unbeatable (the defect this scale removes, moved from bm25 to dense); it would also need an
embedder in the gate, which a bm25 run does not have. Overlap needs no model and is not what any
strategy maximises: BM25 weighs rare words and saturates repeats, RRF fuses ranks. Its own bias,
said plainly: a chunk that paraphrases the question without its words scores low. Where an LLM
verdict scores attempts 0-100 (``verdict: scored``), that verdict ranks them and the scale only
breaks ties.

On either scale an attempt's value is the mean of its ``score_top_k`` highest chunk values (an
empty attempt: -inf), and the heuristic thresholds (``min_top_score``, ``min_mean_score``,
``max_spread``, the presets) apply to the same values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ragkit.text import keywords, word_stem

if TYPE_CHECKING:
    from llama_index.core.schema import NodeWithScore

AttemptScale = Literal["retriever", "question_overlap"]
SCALES: tuple[str, ...] = ("retriever", "question_overlap")
# How each scale is named in a heuristic verdict's reason ("top score 0.3 < 0.5").
SCALE_LABELS = {"retriever": "score", "question_overlap": "question overlap"}

@dataclass
class SearchAttempt:
    """One retrieval the gate made. ``values``: each chunk's value on the gate's scale, in
    retrieval order; ``scale_score``: the mean of the ``score_top_k`` highest, which ranks attempts."""

    query: str
    nodes: list[NodeWithScore]
    mean_score: float  # the mean top raw retriever score, recorded whatever the scale
    values: list[float] = field(default_factory=list)
    scale_score: float = float("-inf")
    strategy: str | None = None
    verdict_score: int | None = None  # scored verdicts
    sufficient: bool | None = None
    issue: str | None = None
    missing_aspects: list[str] = field(default_factory=list)


def raw_scores(nodes: list[NodeWithScore]) -> list[float]:
    """The retriever's scores (a missing score counts as 0)."""
    return [float(node.score or 0.0) for node in nodes]


def _stems(text: str) -> set[str]:
    return {word_stem(word) for word in keywords(text)}


def question_overlaps(question: str, nodes: list[NodeWithScore]) -> list[float]:
    """Per chunk, the share of the question's distinct keywords it contains (stems compared).

    A question with no keyword (only stopwords) gives every chunk 0: no attempt is better."""
    wanted = _stems(question)
    if not wanted:
        return [0.0] * len(nodes)
    return [len(wanted & _stems(node.node.get_content())) / len(wanted) for node in nodes]


def scale_values(scale: str, question: str, nodes: list[NodeWithScore]) -> list[float]:
    """Each chunk's value on ``scale`` (one of ``SCALES``)."""
    return question_overlaps(question, nodes) if scale == "question_overlap" else raw_scores(nodes)


def mean_top(values: list[float], k: int) -> float:
    """Mean of the ``k`` highest values; -inf with none."""
    top = sorted(values, reverse=True)[:k]
    return sum(top) / len(top) if top else float("-inf")


def top_variance(values: list[float], k: int) -> float:
    """Population variance of the ``k`` highest values (0 with fewer than two)."""
    top = sorted(values, reverse=True)[:k]
    if len(top) < 2:
        return 0.0
    mean = sum(top) / len(top)
    return sum((value - mean) ** 2 for value in top) / len(top)


def mean_top_score(nodes: list[NodeWithScore], k: int) -> float:
    """Mean of the ``k`` highest retriever scores (missing scores count as 0); -inf with no nodes."""
    return mean_top(raw_scores(nodes), k)


def score_variance(nodes: list[NodeWithScore], k: int) -> float:
    """Population variance of the ``k`` highest retriever scores (0 with fewer than two)."""
    return top_variance(raw_scores(nodes), k)


def best_attempt(attempts: list[SearchAttempt]) -> int:
    """Index of the highest value on the gate's scale; the earliest on a tie."""
    return max(range(len(attempts)), key=lambda index: (attempts[index].scale_score, -index))


def best_scored_attempt(attempts: list[SearchAttempt]) -> int:
    """Index of the highest verdict score (attempts without one after), then the scale rule."""
    return max(range(len(attempts)), key=lambda index: (
        attempts[index].verdict_score is not None, attempts[index].verdict_score or 0,
        attempts[index].scale_score, -index))
