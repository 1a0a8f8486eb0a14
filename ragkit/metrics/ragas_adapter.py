"""ragas 0.4 metrics run over ragkit's LLMClient and a LlamaIndex embedder: offline, no API key.

ragas' current metric classes (``ragas.metrics.collections``) accept only Instructor-patched
clients of hosted APIs, so the judge LLM is plugged in where ragas still takes a LlamaIndex LLM:
the legacy single-turn metrics with ``ragas.llms.base.LlamaIndexLLMWrapper`` around a
``ClientLLM`` (every call cached, timed and counted by ``LLMClient`` under ``eval:<metric>``),
and ``ragas.embeddings.base.LlamaIndexEmbeddingsWrapper`` around the embedder.

=========================  =====================================================  ===============
ragkit name                ragas class                                            needs
=========================  =====================================================  ===============
faithfulness               Faithfulness                                           LLM
answer_relevancy           ResponseRelevancy (strictness=1)                       LLM, embedder
context_precision          LLMContextPrecisionWithReference                       LLM, reference
context_recall             LLMContextRecall                                       LLM, reference
nonllm_context_precision   NonLLMContextPrecisionWithReference (Levenshtein 0.5)  reference contexts
nonllm_context_recall      NonLLMContextRecall (Levenshtein 0.5)                  reference contexts
answer_overlap             RougeScore (ROUGE-L F1, stemmed)                       reference
=========================  =====================================================  ===============

``strictness=1``: ragas asks a LlamaIndex LLM for one generation per call whatever ``n`` it
wants, so a higher strictness would only log a warning and still use one generated question.

ragas' own retries are off (``RunConfig(max_retries=1)`` is one attempt): the backends retry
transient failures themselves. ragas' output parser still re-asks the judge to fix an
unparseable reply up to three times before it gives up; those calls count under the same stage.

A score ragas cannot reach is NaN with the reason: the timeout, the unparseable reply (quoted),
the failed LLM call, or why ragas itself returned NaN (e.g. the judge found no statements).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import warnings
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ragkit.errors import LLMError

if TYPE_CHECKING:
    from ragkit.llms.llamaindex_llm import ClientLLM

# Before any import of ragas (all are inside functions): ragas otherwise posts usage analytics.
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
# ragas logs every unparseable judge reply at ERROR, over the run's progress bar; ragkit records
# each one as the metric's NaN + reason and counts them in the run summary instead.
logging.getLogger("ragas.prompt").setLevel(logging.CRITICAL)

T = TypeVar("T")

RAGAS_LLM_METRICS = ("faithfulness", "answer_relevancy", "context_precision", "context_recall")
RAGAS_NONLLM_METRICS = ("nonllm_context_precision", "nonllm_context_recall", "answer_overlap")

# Why ragas returns NaN without raising, per metric: its judge step produced nothing to score.
_NAN_REASONS = {
    "faithfulness": "the judge found no statements in the answer to verify",
    "answer_relevancy": "the judge generated no question from the answer",
    "context_recall": "the judge classified no statement of the reference answer",
}


@dataclass(frozen=True)
class RagasOutcome:
    value: float  # NaN when the metric could not be computed
    error: str | None  # the reason, when value is NaN


def _metric(name: str) -> Any:
    with warnings.catch_warnings():
        # ragas points to ragas.metrics.collections, whose metrics need an Instructor client.
        warnings.simplefilter("ignore", DeprecationWarning)
        from ragas import metrics

        factories: dict[str, Callable[[], Any]] = {
            "faithfulness": lambda: metrics.Faithfulness(),
            "answer_relevancy": lambda: metrics.ResponseRelevancy(strictness=1),
            "context_precision": lambda: metrics.LLMContextPrecisionWithReference(),
            "context_recall": lambda: metrics.LLMContextRecall(),
            "nonllm_context_precision": lambda: metrics.NonLLMContextPrecisionWithReference(),
            "nonllm_context_recall": lambda: metrics.NonLLMContextRecall(),
            "answer_overlap": lambda: metrics.RougeScore(rouge_type="rougeL", mode="fmeasure"),
        }
        if name not in factories:
            raise ValueError(f"no ragas metric '{name}'. Valid: {', '.join(factories)}")
        return factories[name]()


def build_ragas_metric(name: str, llm: ClientLLM | None, embed_model: Any | None) -> Any:
    """The ragas metric ``name``, wired to ``llm`` and ``embed_model`` and initialised."""
    from ragas.embeddings.base import LlamaIndexEmbeddingsWrapper
    from ragas.llms.base import LlamaIndexLLMWrapper
    from ragas.run_config import RunConfig

    run_config = RunConfig(max_retries=1)
    metric = _metric(name)
    with warnings.catch_warnings():
        # Deprecated in favour of llm_factory / embedding_factory, which need hosted-API clients.
        warnings.simplefilter("ignore", DeprecationWarning)
        if name in RAGAS_LLM_METRICS:
            if llm is None:
                raise ValueError(f"ragas metric '{name}' needs an LLM")
            metric.llm = LlamaIndexLLMWrapper(llm, run_config=run_config)
        if name == "answer_relevancy":
            if embed_model is None:
                raise ValueError(f"ragas metric '{name}' needs an embedding model")
            metric.embeddings = LlamaIndexEmbeddingsWrapper(embed_model, run_config=run_config)
    metric.init(run_config)
    return metric


def ragas_score(
    name: str,
    *,
    question: str,
    answer: str,
    contexts: list[str],
    reference: str | None,
    reference_contexts: list[str] | None,
    llm: ClientLLM | None,
    embed_model: Any | None,
    timeout_s: float,
) -> RagasOutcome:
    """Score one sample with one ragas metric; every failure becomes NaN with its reason."""
    from langchain_core.exceptions import OutputParserException
    from pydantic import ValidationError
    from ragas.dataset_schema import SingleTurnSample
    from ragas.exceptions import RagasOutputParserException

    metric = build_ragas_metric(name, llm, embed_model)
    sample = SingleTurnSample(
        user_input=question, response=answer, retrieved_contexts=contexts,
        reference=reference, reference_contexts=reference_contexts,
    )
    try:
        value = float(run_coroutine(metric.single_turn_ascore(sample, timeout=timeout_s)))
    except TimeoutError:
        return RagasOutcome(math.nan, f"timeout after {timeout_s:g} s")
    except (RagasOutputParserException, OutputParserException, ValidationError):
        reply = llm.last_result.text if llm is not None and llm.last_result is not None else ""
        return RagasOutcome(math.nan, f"unparseable judge output (after ragas' fix-up retries): {_preview(reply)}")
    except LLMError as error:
        return RagasOutcome(math.nan, f"LLM call failed: {error}")
    except Exception as error:  # noqa: BLE001  a failed metric is a row with its reason, never a lost row
        return RagasOutcome(math.nan, f"ragas {name} failed: {type(error).__name__}: {error}")
    if math.isnan(value):
        return RagasOutcome(math.nan, _NAN_REASONS.get(name, f"ragas {name} returned NaN"))
    return RagasOutcome(value, None)


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to the end, also when called from inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragkit-ragas") as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _preview(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit] + "...")
