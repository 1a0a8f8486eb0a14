"""RAGChecker's claim-level diagnostics (Ru et al. 2024), judged by the evaluation LLM.

The ground truth is the reference answer (the question's first answer, its span text) or, for a
multi-part answer, its parts (one text each, each one claim). The reference and the response are
split into claims by the groundedness judge's sentence rule
(``ragkit.stages.answer.groundedness.split_claims``, at most ``MAX_CLAIMS`` each, fragments of one word
kept: a ground truth is often a short answer span such as "14 days", which is one claim). Each
entailment is one LLM call with the groundedness judge's verdict schema (``ClaimVerdict``), the
question shown beside the statement so that a span reads as an answer to it.

- ``context_utilization``: of the ground truth's claims entailed by the retrieved context (the
  chunks joined, first ``CONTEXT_CHARS`` characters), the share the response also entails.
  NaN when no ground-truth claim is in the context (nothing there to use).
- ``noise_sensitivity``: the share of the response's claims that are incorrect (not entailed by
  the ground truth) and entailed by the retrieved context, i.e. noise from the retrieved chunks
  the generator repeated. RAGChecker reports this apart for relevant and irrelevant chunks; here
  it is their sum (any retrieved chunk), since the sample carries no per-chunk relevance. Lower
  is better (``ragkit.metrics.names.LOWER_IS_BETTER``).

Only the calls a value needs are made (a ground-truth claim not in the context is not checked
against the response; a correct response claim is not checked against the context). A verdict
that cannot be parsed, or a failed call, makes the value NaN with the reason, never 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ragkit.errors import LLMError
from ragkit.llms.calls import LLMClient
from ragkit.metrics.names import CLAIM_DIAGNOSTICS
from ragkit.metrics.ragas_adapter import RagasOutcome
from ragkit.stages.answer.groundedness import SYSTEM, ClaimVerdict, split_claims
from ragkit.stages.prompts import joined_context

CLAIM_METRICS = CLAIM_DIAGNOSTICS
MAX_CLAIMS = 8  # per side: bounds the calls at 2 x 8 per question and metric
MIN_CLAIM_WORDS = 1
CONTEXT_CHARS = 4000  # of the joined retrieved chunks shown per check
REPLY_TOKENS = 80
QUOTED_REPLY_CHARS = 200

CHECK_TEMPLATE = (
    "Examples:\n"
    "Question: Why is the sky blue?\n"
    "Text: Air scatters blue light more than red light.\n"
    "Statement: Blue light is scattered more.\n"
    '{{"supported": true, "evidence": "Air scatters blue light more"}}\n'
    "Statement: The sky is green at noon.\n"
    '{{"supported": false, "evidence": ""}}\n\n'
    "Question: {question}\n"
    "Text: {text}\n"
    "Statement: {claim}\n"
    "Does the text support the statement (as an answer to the question)? Reply as JSON with supported "
    "and evidence."
)


class _Unusable(Exception):
    """A verdict the value needs could not be had; the message is the NaN's reason."""


def claim_score(name: str, *, question: str, answer: str, contexts: list[str], reference: str,
                llm: LLMClient, reference_parts: list[str] | None = None,
                max_tokens: int | None = None) -> RagasOutcome:
    """``name`` (one of ``CLAIM_METRICS``) for one answered question; the inputs are checked
    non-empty by the caller (``ragkit.metrics.generation``)."""
    def entailed(claim: str, text: str) -> bool:
        return _verdict(llm, f"eval:{name}", question, claim, text, max_tokens or REPLY_TOKENS)

    if name not in CLAIM_METRICS:
        raise ValueError(f"unknown claim metric '{name}'. Valid: {', '.join(CLAIM_METRICS)}")
    context = joined_context(contexts, CONTEXT_CHARS)
    parts = [" ".join(part.split()) for part in reference_parts or [] if part.strip()]
    truth = parts[:MAX_CLAIMS] if parts else split_claims(reference, MIN_CLAIM_WORDS)[:MAX_CLAIMS]
    truth_text = "; ".join(parts) if parts else reference
    try:
        if name == "context_utilization":
            return _context_utilization(truth, context, answer, entailed)
        return _noise_sensitivity(split_claims(answer, MIN_CLAIM_WORDS)[:MAX_CLAIMS], context, truth_text, entailed)
    except _Unusable as reason:
        return RagasOutcome(math.nan, str(reason))


def _context_utilization(truth: list[str], context: str, answer: str,
                         entailed: Callable[[str, str], bool]) -> RagasOutcome:
    if not truth:
        return RagasOutcome(math.nan, "no claims in the reference answer")
    in_context = [claim for claim in truth if entailed(claim, context)]
    if not in_context:
        return RagasOutcome(math.nan, f"none of the reference's {len(truth)} claim(s) is in the retrieved context")
    used = sum(entailed(claim, answer) for claim in in_context)
    return RagasOutcome(used / len(in_context), None)


def _noise_sensitivity(response: list[str], context: str, reference: str,
                       entailed: Callable[[str, str], bool]) -> RagasOutcome:
    if not response:
        return RagasOutcome(math.nan, "no claims in the answer")
    noisy = sum(not entailed(claim, reference) and entailed(claim, context) for claim in response)
    return RagasOutcome(noisy / len(response), None)


def _verdict(llm: LLMClient, stage: str, question: str, claim: str, text: str, max_tokens: int) -> bool:
    prompt = CHECK_TEMPLATE.format(question=" ".join(question.split()), text=text, claim=claim)
    try:
        result = llm.call(prompt, stage=stage, schema=ClaimVerdict, system=SYSTEM, max_tokens=max_tokens)
    except LLMError as error:
        raise _Unusable(f"judge call failed for claim '{claim}': {error}") from error
    if result.parsed is None:
        reply = result.text[:QUOTED_REPLY_CHARS]
        raise _Unusable(f"unparseable judge reply for claim '{claim}': {result.parse_error} (reply: '{reply}')")
    return bool(result.parsed.supported)
