"""Generation metrics for answered questions: ragas judges, ragas' non-LLM forms, embedding groundedness.

``evaluate_generation(samples, params, llm=..., embed_model=...)`` returns a long table with one
row per question x metric: ``question_id, metric, value, error``.

Metrics (``EvaluationParams.metrics``):

- ``faithfulness``, ``answer_relevancy``, ``context_precision``, ``context_recall``: ragas'
  LLM-judged metrics over the evaluation LLM (see ``ragkit.metrics.ragas_adapter``). The
  context metrics compare against the reference answer.
- ``nonllm_context_precision``, ``nonllm_context_recall``: ragas' string-similarity forms against
  the reference contexts.
- ``answer_overlap``: ROUGE-L F1 of the answer against the reference answer (ragas RougeScore).
- ``embedding_groundedness``: the share of answer sentences that some context sentence supports
  by embedding similarity (``ragkit.metrics.grounding``). Not an LLM verdict: it is shown beside
  ``faithfulness``, never as it.
- ``context_utilization``, ``noise_sensitivity``: RAGChecker's claim-level diagnostics, judged
  by the evaluation LLM against the reference answer (``ragkit.metrics.claims``).
- ``answer_length``: words in the answer, citation markers left out (``ragkit.metrics.answer_length``);
  ``answer_chars``: its characters as written. Both descriptive (no better direction), and an empty
  answer is 0, not missing.

A value that cannot be computed is NaN and ``error`` says why: a missing input (no reference
answer, no contexts, empty answer; checked before any LLM call), no LLM or embedder configured,
a timeout, an unparseable judge reply (quoted), a failed LLM call. Never 0.

Every LLM call goes through the given ``LLMClient`` under the stage ``eval:<metric>``, so it is
cached (a second evaluation sends nothing to the model) and its tokens and time are reported
apart from the pipeline's stages.

Judge reliability, ``repeats`` r >= 2 (LLM-judged metrics only; the others are deterministic and
computed once): repeat k asks the judge with seed + k at ``repeat_temperature``, each repeat a
separate cached call (greedy decoding would only repeat itself). Then per question and metric:

- ``<metric>``: the mean of the valid repeats; NaN when none was valid. ``error`` lists the
  failed repeats' reasons ("2 of 3 repeats invalid: ...") even when a mean exists. Such a row
  counts as failed in means, comparisons and the failure summary (a row with an error is never
  scored); its value stays for inspection.
- ``<metric>.judge_sd``: the sample standard deviation (ddof=1) of the valid repeats; NaN with
  a reason when fewer than two were valid.
- ``<metric>.invalid_share``: the share of repeats that gave no value, for any reason.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragkit.llms.calls import LLMClient
from ragkit.metrics import ragas_adapter
from ragkit.metrics.answer_length import answer_chars, answer_length
from ragkit.metrics.grounding import DEFAULT_THRESHOLD, embedding_groundedness
from ragkit.metrics.names import CLAIM_DIAGNOSTICS
from ragkit.results.schema import INVALID_SHARE_SUFFIX, JUDGE_SD_SUFFIX

COLUMNS = ["question_id", "metric", "value", "error"]


@dataclass(frozen=True)
class MetricSpec:
    """What a metric needs; checked per question before any computation."""

    needs_llm: bool
    needs_embeddings: bool
    inputs: tuple[str, ...]  # GenerationSample fields that must be non-empty


METRICS: dict[str, MetricSpec] = {
    "faithfulness": MetricSpec(True, False, ("question", "answer", "contexts")),
    "answer_relevancy": MetricSpec(True, True, ("question", "answer")),
    "context_precision": MetricSpec(True, False, ("question", "contexts", "reference")),
    "context_recall": MetricSpec(True, False, ("question", "contexts", "reference")),
    "nonllm_context_precision": MetricSpec(False, False, ("contexts", "reference_contexts")),
    "nonllm_context_recall": MetricSpec(False, False, ("contexts", "reference_contexts")),
    "answer_overlap": MetricSpec(False, False, ("answer", "reference")),
    "embedding_groundedness": MetricSpec(False, True, ("answer", "contexts")),
    "context_utilization": MetricSpec(True, False, ("question", "answer", "contexts", "reference")),
    "noise_sensitivity": MetricSpec(True, False, ("question", "answer", "contexts", "reference")),
    "answer_length": MetricSpec(False, False, ("answer",)),
    "answer_chars": MetricSpec(False, False, ("answer",)),
}

_MISSING = {
    "question": "empty question",
    "answer": "empty answer",
    "contexts": "no retrieved contexts",
    "reference": "no reference answer",
    "reference_contexts": "no reference contexts",
}


class GenerationSample(BaseModel):
    """One answered question, with its ground truth where the dataset has it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question_id: str = Field(min_length=1, description="The question's id in the QA set.")
    question: str = Field(description="The question as asked.")
    answer: str = Field(description="The generated answer.")
    contexts: list[str] = Field(default_factory=list, description="The retrieved texts the answer was generated from.")
    reference: str | None = Field(default=None, description="The reference (gold) answer, if known.")
    reference_contexts: list[str] | None = Field(
        default=None, description="The gold passages (e.g. answer spans' paragraphs), if known."
    )
    reference_parts: list[str] | None = Field(
        default=None, description="A multi-part answer's parts (one text each), if it has parts: the "
        "ground-truth claims of context_utilization and noise_sensitivity.",
    )


class EvaluationParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    metrics: list[str] = Field(
        default_factory=lambda: ["faithfulness", "answer_relevancy", "embedding_groundedness"],
        min_length=1,
        description="Metrics to compute, from: " + ", ".join(METRICS) + ".",
    )
    repeats: int = Field(
        default=1, ge=1, le=10,
        description="Times each LLM-judged metric is scored per question; >= 2 also reports the judge's "
        "standard deviation and its share of invalid replies.",
    )
    repeat_temperature: float = Field(
        default=0.7, gt=0.0, le=2.0,
        description="Judge sampling temperature when repeats >= 2 (repeat k uses seed + k).",
    )
    timeout_s: float = Field(
        default=300.0, gt=0.0, le=3600.0,
        description="Seconds one LLM-judged metric may take on one question (one repeat); then NaN with "
        "the reason. A timeout says nothing about the answer, so a re-run tries it again.",
    )
    judge_max_tokens: int | None = Field(
        default=None, ge=16, le=32768, description="Most tokens per judge reply; None: the LLM's own max_tokens."
    )
    groundedness_threshold: float = Field(
        default=DEFAULT_THRESHOLD, ge=0.0, le=1.0,
        description="Cosine similarity at which a context sentence supports an answer sentence "
        "(embedding_groundedness; calibrated default, see ragkit.metrics.grounding).",
    )

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, metrics: list[str]) -> list[str]:
        for name in metrics:
            if name not in METRICS:
                raise ValueError(f"unknown metric '{name}'. Valid metrics: {', '.join(METRICS)}")
        duplicated = sorted({name for name in metrics if metrics.count(name) > 1})
        if duplicated:
            raise ValueError(f"metric '{duplicated[0]}' is listed more than once")
        return metrics


def evaluate_generation(
    samples: Iterable[GenerationSample],
    params: EvaluationParams,
    *,
    llm: LLMClient | None,
    embed_model: Any | None,
) -> pd.DataFrame:
    """Score every sample on every metric of ``params``: one row per question x metric (see module doc).

    ``llm`` is the evaluation judge (it may differ from the pipeline's LLM); ``embed_model`` is a
    LlamaIndex ``BaseEmbedding``, e.g. ``Embedder.embed_model()``. Either may be None: the
    metrics that need it are NaN with the reason.
    """
    rows: list[dict[str, Any]] = []
    for sample in samples:
        for name in params.metrics:
            rows += _metric_rows(sample, name, params, llm, embed_model)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["value"] = frame["value"].astype(float)
    return frame


def _metric_rows(
    sample: GenerationSample, name: str, params: EvaluationParams, llm: LLMClient | None, embed_model: Any | None
) -> list[dict[str, Any]]:
    spec = METRICS[name]
    if name == "answer_length":  # an empty answer has a length (0), not a missing input
        return _rows(sample.question_id, name, [("", float(answer_length(sample.answer)), None)])
    if name == "answer_chars":
        return _rows(sample.question_id, name, [("", float(answer_chars(sample.answer)), None)])
    repeated = spec.needs_llm and params.repeats >= 2
    reason = _unmet_need(sample, spec, llm, embed_model)
    if reason is not None:
        extra = [(JUDGE_SD_SUFFIX, math.nan, reason), (INVALID_SHARE_SUFFIX, math.nan, reason)] if repeated else []
        return _rows(sample.question_id, name, [("", math.nan, reason), *extra])
    if name == "embedding_groundedness":
        result = embedding_groundedness(
            sample.answer, sample.contexts, embed_model, threshold=params.groundedness_threshold
        )
        return _rows(sample.question_id, name, [("", result.score, result.reason)])
    if not repeated:  # a metric without an LLM, or one judge call
        outcome = _ragas(name, sample, params, llm, embed_model)
        return _rows(sample.question_id, name, [("", outcome.value, outcome.error)])
    # Repeats are for metrics that need an LLM, and _unmet_need found one configured.
    assert llm is not None
    outcomes = [
        _ragas(name, sample, params, resampled_client(llm, repeat, params.repeat_temperature), embed_model)
        for repeat in range(params.repeats)
    ]
    return _rows(sample.question_id, name, _aggregate_repeats(outcomes))


def _unmet_need(
    sample: GenerationSample, spec: MetricSpec, llm: LLMClient | None, embed_model: Any | None
) -> str | None:
    for field in spec.inputs:
        value = getattr(sample, field)
        if value is None or (isinstance(value, str) and not value.strip()) or (
            isinstance(value, list) and not any(text.strip() for text in value)
        ):
            return _MISSING[field]
    if spec.needs_llm and llm is None:
        return "no LLM configured for evaluation"
    if spec.needs_embeddings and embed_model is None:
        return "no embedding model configured"
    return None


def _ragas(
    name: str, sample: GenerationSample, params: EvaluationParams, llm: LLMClient | None, embed_model: Any | None
) -> ragas_adapter.RagasOutcome:
    # Imported here: this module's METRICS and EvaluationParams are read when a config is checked,
    # and these import LlamaIndex (a stage's claim rule; an LLM adapter subclassing LlamaIndex's),
    # which a finished grid's re-run does not load.
    from ragkit.llms.llamaindex_llm import ClientLLM
    from ragkit.metrics.claims import claim_score

    if name in CLAIM_DIAGNOSTICS:  # ours, not ragas': called directly through the client
        assert llm is not None and sample.reference is not None  # _unmet_need checked both
        return claim_score(name, question=sample.question, answer=sample.answer, contexts=sample.contexts,
                           reference=sample.reference, reference_parts=sample.reference_parts, llm=llm,
                           max_tokens=params.judge_max_tokens)
    judge = ClientLLM(llm, stage=f"eval:{name}", max_tokens=params.judge_max_tokens) if llm is not None else None
    return ragas_adapter.ragas_score(
        name,
        question=sample.question,
        answer=sample.answer,
        contexts=sample.contexts,
        reference=sample.reference,
        reference_contexts=sample.reference_contexts,
        llm=judge,
        embed_model=embed_model,
        timeout_s=params.timeout_s,
    )


def _aggregate_repeats(outcomes: Sequence[ragas_adapter.RagasOutcome]) -> list[tuple[str, float, str | None]]:
    valid = [outcome.value for outcome in outcomes if outcome.error is None]
    failed = [outcome.error for outcome in outcomes if outcome.error is not None]
    total = len(outcomes)
    error = None
    if failed:
        reasons = "; ".join(dict.fromkeys(failed))  # each distinct reason once
        error = f"{len(failed)} of {total} repeats invalid: {reasons}"
    mean = statistics.fmean(valid) if valid else math.nan
    if len(valid) >= 2:
        spread, spread_error = statistics.stdev(valid), None
    else:
        spread, spread_error = math.nan, f"fewer than 2 valid repeats ({len(valid)} of {total})"
    return [
        ("", mean, error),
        (JUDGE_SD_SUFFIX, spread, spread_error),
        (INVALID_SHARE_SUFFIX, len(failed) / total, None),
    ]


def _rows(question_id: str, name: str, parts: Sequence[tuple[str, float, str | None]]) -> list[dict[str, Any]]:
    return [
        {"question_id": question_id, "metric": name + suffix, "value": value, "error": error}
        for suffix, value, error in parts
    ]


def resampled_client(client: LLMClient, repeat: int, temperature: float) -> LLMClient:
    """``client`` sampling with seed + ``repeat`` at ``temperature``: the seed and temperature are
    backend parameters, so each repeat has its own cache key and a second run reuses it."""
    base_seed = getattr(client.backend.params, "seed", None) or 0
    return client.with_backend_params(seed=base_seed + repeat, temperature=temperature)
