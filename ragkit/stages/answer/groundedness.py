"""Groundedness judge: the fraction of an answer's claims that the retrieved context supports.

The answer is split into claims (sentences, by rule; or by the LLM with ``claim_split: llm``,
falling back to the rule when its reply is unusable). Each claim is checked against the
context in its own call, ``{supported, evidence}``. A verdict that cannot be parsed makes the
claim *unknown*: it is counted and listed, but neither supported nor unsupported, so the score
is supported / (supported + unsupported). With no verdict at all the score is None (NaN for
pandas) with the reason, never 0 or 1.

``nli`` mode checks the claims without an LLM: a local NLI model (``nli_model_path``, a
sentence-transformers CrossEncoder folder with an entailment class) gives each claim's
entailment probability against each context chunk, and a claim is supported when the best one
exceeds ``entailment_threshold`` (0.7). Chunks are premises one by one, not joined: an NLI model
reads about 512 tokens, so a joined context would be cut, and a claim needs one chunk to back it.
With ``claim_split: llm`` the LLM splits the answer into claims and the NLI model checks them
(the design's pairing); the judge then calls the LLM in mode ``nli`` too (``calls_llm``), and an
unusable split is recorded (``split_fell_back``, ``split_error``) and the rule's claims are checked.

It is a LlamaIndex ``BaseEvaluator`` (``aevaluate`` -> ``EvaluationResult``); ``judge`` is the
synchronous call the pipeline uses, recording one judgement per answer in the trace.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, cast

from llama_index.core.evaluation import BaseEvaluator, EvaluationResult
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixinType
from pydantic import BaseModel, Field

from ragkit.errors import LLMError
from ragkit.local_models import entailment_probabilities
from ragkit.stages.answer.params import GroundednessJudgeInfo, GroundednessParams
from ragkit.stages.base import Judgement, JudgementLog, Stage
from ragkit.stages.prompts import joined_context
from ragkit.text import rule_sentences, strip_citations

SUPPORTED, UNSUPPORTED, UNKNOWN = "supported", "unsupported", "unknown"


class ClaimsReply(BaseModel):
    claims: list[str] = Field(description="Short factual statements made by the answer.")


class ClaimVerdict(BaseModel):
    supported: bool = Field(description="True if the context states or implies the claim.")
    evidence: str = Field(default="", description="The words of the context that support it, or empty.")


SYSTEM = "You check statements against a context. Reply with one JSON object only."

SPLIT_TEMPLATE = (
    "Example:\n"
    "Answer: The sky is blue [1]. It scatters light.\n"
    '{{"claims": ["The sky is blue.", "The sky scatters light."]}}\n\n'
    "Answer: {answer}\n"
    "List the factual claims of the answer. Reply as JSON with claims."
)

VERIFY_TEMPLATE = (
    "Examples:\n"
    "Context: Air scatters blue light more than red light.\n"
    "Claim: Blue light is scattered more.\n"
    '{{"supported": true, "evidence": "Air scatters blue light more"}}\n'
    "Claim: The sky is green at noon.\n"
    '{{"supported": false, "evidence": ""}}\n\n'
    "Context: {context}\n"
    "Claim: {claim}\n"
    "Does the context support the claim? Reply as JSON with supported and evidence."
)


def split_claims(answer: str, min_words: int) -> list[str]:
    """Sentences of the answer without citation markers; fragments under ``min_words`` words dropped."""
    return [sentence for sentence in rule_sentences(strip_citations(answer)) if len(sentence.split()) >= min_words]


class GroundednessJudge(GroundednessJudgeInfo, Stage, BaseEvaluator):
    params: GroundednessParams

    def __init__(self, params: GroundednessParams, llm: Any = None, **_dependencies: Any) -> None:
        Stage.__init__(self, params, llm)
        if params.mode == "nli" and params.claim_split == "llm" and llm is None:
            raise ValueError("judge 'groundedness' in mode 'nli' with claim_split llm needs an LLM client")
        # Any template: _update_prompts takes what LlamaIndex's PromptMixin hands it.
        self.split_prompt: BasePromptTemplate = PromptTemplate(SPLIT_TEMPLATE)
        self.verify_prompt: BasePromptTemplate = PromptTemplate(VERIFY_TEMPLATE)

    def _get_prompts(self) -> PromptDictType:
        return {"split_prompt": self.split_prompt, "verify_prompt": self.verify_prompt}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "split_prompt" in prompts:
            self.split_prompt = prompts["split_prompt"]
        if "verify_prompt" in prompts:
            self.verify_prompt = prompts["verify_prompt"]

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    async def aevaluate(self, query: str | None = None, response: str | None = None,
                        contexts: Sequence[str] | None = None, **kwargs: Any) -> EvaluationResult:
        """Score = supported fraction; feedback lists the unsupported and unknown claims."""
        trace = kwargs.get("trace") or JudgementLog()
        score, judgement = await asyncio.to_thread(self.judge, query or "", response, contexts, trace)
        if judgement is None:
            return EvaluationResult(query=query, response=response, contexts=list(contexts or []),
                                    invalid_result=True, invalid_reason="groundedness judge is off")
        return EvaluationResult(
            query=query, response=response, contexts=list(contexts or []), score=score,
            passing=None if score is None else score >= self.params.passing_score,
            feedback=judgement.decision["feedback"],
            invalid_result=score is None, invalid_reason=judgement.decision.get("no_score_reason"),
        )

    def judge(self, query: str, answer: str | None, contexts: Sequence[str] | None,
              trace: JudgementLog) -> tuple[float | None, Judgement | None]:
        """``(supported fraction or None, judgement)``; ``(None, None)`` when off, with nothing recorded."""
        if answer is None or contexts is None:
            raise ValueError(f"judge '{self.name}' needs the answer and the contexts")
        if not self.enabled:
            return None, None
        started = time.perf_counter()
        claims, split_info = self._claims(answer)
        if self.params.mode == "nli":
            checks = self._nli_checks(claims, contexts)
        else:
            context = joined_context(contexts, self.params.context_chars)
            checks = [self._check(claim, context) for claim in claims]
        counts = {label: sum(check["verdict"] == label for check in checks)
                  for label in (SUPPORTED, UNSUPPORTED, UNKNOWN)}
        scored = counts[SUPPORTED] + counts[UNSUPPORTED]
        score = counts[SUPPORTED] / scored if scored else None
        if not claims:
            reason = "no claims in the answer"
        elif not scored:
            reason = f"no verdict could be parsed for any of the {len(claims)} claims"
        else:
            reason = None
        decision = {**split_info, "claims": checks, **counts, "score": score, "no_score_reason": reason,
                    "feedback": _feedback(checks, score, reason)}
        errors = [f"claim {i}: {c['error']}" for i, c in enumerate(checks, start=1) if c["error"]]
        judgement = Judgement(
            judge=self.name, input_summary=f"{query} | {len(claims)} claims"[:500], decision=decision,
            raw_reply="\n---\n".join(check["raw_reply"] or "" for check in checks) or None,
            valid=not errors and bool(claims), error="; ".join(errors) or reason,
            fell_back=score is None, seconds=time.perf_counter() - started,
            cache_hit=bool(checks) and all(check["cache_hit"] for check in checks),
        )
        trace.add(judgement)
        return score, judgement

    def _claims(self, answer: str) -> tuple[list[str], dict[str, Any]]:
        rule = split_claims(answer, self.params.min_claim_words)[: self.params.max_claims]
        if self.params.claim_split == "heuristic" or not answer.strip():
            return rule, {"claim_split": "heuristic"}
        info: dict[str, Any] = {"claim_split": "llm"}
        try:
            result = self.llm_client().call(self.split_prompt.format(answer=" ".join(answer.split())),
                                            stage=f"judge:{self.name}", schema=ClaimsReply, system=SYSTEM,
                                            max_tokens=self.params.max_tokens * 2, cache_salt=self.cache_salt())
        except LLMError as call_error:
            return rule, {**info, "split_fell_back": True, "split_error": str(call_error)}
        claims = [" ".join(c.split()) for c in result.parsed.claims if c.strip()] if result.parsed else []
        if not claims:
            error = result.parse_error or "no claims in the reply"
            return rule, {**info, "split_fell_back": True, "split_error": error, "split_reply": result.text}
        return claims[: self.params.max_claims], {**info, "split_reply": result.text}

    def _check(self, claim: str, context: str) -> dict[str, Any]:
        check: dict[str, Any] = {"claim": claim, "verdict": UNKNOWN, "evidence": "", "raw_reply": None,
                                 "error": None, "cache_hit": False}
        try:
            result = self.ask(self.verify_prompt.format(context=context, claim=claim), ClaimVerdict,
                              system=SYSTEM, max_tokens=self.params.max_tokens)
        except LLMError as error:
            return {**check, "error": str(error)}
        check.update(raw_reply=result.text, cache_hit=result.cache_hit)
        if result.parsed is None:
            return {**check, "error": result.parse_error}
        verdict = result.parsed
        # Recorded, not scored: a small model often "supports" a claim with words the context lacks.
        quoted = " ".join(verdict.evidence.lower().split()).strip(" .")
        return {**check, "verdict": SUPPORTED if verdict.supported else UNSUPPORTED, "evidence": verdict.evidence,
                "evidence_in_context": bool(quoted) and quoted in context.lower()}

    def _nli_checks(self, claims: list[str], contexts: Sequence[str]) -> list[dict[str, Any]]:
        """Each claim's best entailment probability over the context chunks, against the threshold."""
        premises = [" ".join(context.split())[: self.params.context_chars] for context in contexts if context.strip()]
        blank = {"evidence": "", "raw_reply": None, "error": None, "cache_hit": False}
        if not premises:
            return [{"claim": claim, "verdict": UNSUPPORTED, "entailment": 0.0, **blank} for claim in claims]
        pairs = [(premise, claim) for claim in claims for premise in premises]
        probabilities = entailment_probabilities(cast(str, self.params.nli_model_path), pairs)
        checks = []
        for number, claim in enumerate(claims):
            row = probabilities[number * len(premises): (number + 1) * len(premises)]
            best = max(range(len(premises)), key=lambda index: row[index])
            supported = row[best] > self.params.entailment_threshold
            checks.append({"claim": claim, "verdict": SUPPORTED if supported else UNSUPPORTED,
                           "entailment": row[best], "best_chunk": best + 1, **blank,
                           "evidence": premises[best][:200] if supported else ""})
        return checks


def unsupported_claims(judgement: Judgement | None) -> list[str]:
    """The claims a groundedness judgement found unsupported, in order."""
    if judgement is None:
        return []
    return [check["claim"] for check in judgement.decision.get("claims", []) if check["verdict"] == UNSUPPORTED]


def _feedback(checks: list[dict[str, Any]], score: float | None, reason: str | None) -> str:
    lines = [f"score: {f'n/a ({reason})' if score is None else f'{score:.2f}'}"]
    lines += [f"unsupported: {check['claim']}" for check in checks if check["verdict"] == UNSUPPORTED]
    lines += [f"unknown (unparseable verdict): {check['claim']}" for check in checks if check["verdict"] == UNKNOWN]
    return "\n".join(lines)

