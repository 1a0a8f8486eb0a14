"""An LLM relevance judge for a pool: one call per (question, chunk), a grade 0-3, cached.

Grades (the rubric in the prompt): 0 unrelated; 1 on the topic but holds nothing of the answer;
2 holds part of the answer; 3 holds the whole answer. For agreement and combined grades they
map onto a person's 0-2 scale as ragkit.labels.grades.JUDGE_TO_HUMAN says.

Every call goes through the recorded client (ragkit.llms.calls.LLMClient): cached by backend,
model, prompt and the prompt version, timed, token-counted (stage ``labels:relevance``). A reply
that does not parse, one whose reason repeats the prompt's template (``repeats_template``: the
model copied its instructions), or a call that fails, is a label row with ``valid: false``, the
error and the raw reply, and no grade: it is never counted as 0. A server that is down stops the pass
(BackendUnavailable): what was judged before it is kept by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragkit.errors import ConfigError, LLMError
from ragkit.labels.pooling import Pool
from ragkit.labels.store import HUMAN, JUDGE, JUDGE_RELEVANCE_MAX
from ragkit.llms.calls import LLMClient

PROMPT_VERSION = "pool-relevance-v2"
STAGE = "labels:relevance"
SYSTEM = "You grade how relevant a passage is to a question. Reply with JSON only."
# The reply format is described in words, with no template to fill in: a small model shown
# {"grade": <0, 1, 2 or 3>, "reason": "<one short sentence>"} copies it back as its reply.
PROMPT = """Question: {question}

Passage:
\"\"\"
{passage}
\"\"\"

How much of the answer to the question does the passage hold?
3 means the whole answer.
2 means part of the answer.
1 means none of the answer, though it is on the topic.
0 means it is unrelated.

Reply with a JSON object whose key "grade" is the number you chose and whose key "reason" says in a few \
words what in the passage made you choose it."""
# Wording of the prompts' reply instructions (this one's and the earlier template's): a reason
# made of it, or holding a <placeholder>, repeats the prompt instead of judging the passage.
TEMPLATE_WORDING = ("one short sentence", "what in the passage made you choose it", "the number you chose",
                    "0, 1, 2 or 3")
_PLACEHOLDER = re.compile(r"<\w[^<>]{0,40}>")  # "<one short sentence>", not "a < b"


def repeats_template(reason: str) -> bool:
    """Whether a reply's reason repeats the prompt's own wording or a placeholder."""
    text = " ".join(reason.lower().split())
    return bool(_PLACEHOLDER.search(text)) or any(wording in text for wording in TEMPLATE_WORDING)


class RelevanceReply(BaseModel):
    """A grade 0-3 and the reason; a reason that repeats the prompt's template makes the reply
    invalid (the model copied its instructions; its grade is no judgement)."""

    model_config = ConfigDict(extra="ignore")

    grade: int = Field(ge=0, le=JUDGE_RELEVANCE_MAX)
    reason: str = ""

    @field_validator("reason")
    @classmethod
    def _not_the_template(cls, reason: str) -> str:
        if repeats_template(reason):
            raise ValueError(f"the reason repeats the prompt's template ({reason[:80]!r}), not a judgement")
        return reason


class RelevanceJudgeParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_passage_chars: int = Field(default=2000, ge=100, le=20000,
                                   description="A longer chunk is cut to this many characters in the prompt.")
    skip_human_labelled: bool = Field(default=False, description="Judge only chunks no person has graded "
                                      "(by default every chunk, so the judge can be measured against people).")
    max_tokens: int = Field(default=128, ge=16, le=2048, description="Most tokens of one reply.")


def judge_name(client: LLMClient) -> str:
    return f"{client.backend.name}:{client.backend.model_name}"


def judge_pool(pool: Pool, client: LLMClient, labels: pd.DataFrame | None = None,
               params: RelevanceJudgeParams | None = None,
               progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """Label rows (source ``judge``) for the pool's chunks this judge has not validly graded yet;
    ``progress(done, total)`` after each chunk."""
    params = params or RelevanceJudgeParams()
    model = judge_name(client)
    annotator = f"{JUDGE}:{model}"
    done: set[str] = set()
    people: set[str] = set()
    if labels is not None and not labels.empty:
        mine = labels[(labels["pool_id"] == pool.pool_id) & (labels["annotator"] == annotator)
                      & labels["valid"].fillna(False).astype(bool)]
        done = set(mine["item_id"])
        humans = labels[(labels["pool_id"] == pool.pool_id) & (labels["source"] == HUMAN)
                        & labels["relevance"].notna()]
        people = set(humans["item_id"])
    todo = [(question, chunk) for question in pool.questions for chunk in question.chunks
            if chunk.item_id not in done and not (params.skip_human_labelled and chunk.item_id in people)]
    if any(chunk.text is None for _, chunk in todo):
        raise ConfigError(f"pool {pool.pool_id} holds no chunk texts: build it again with --corpus "
                          "(the dataset folder or ingested corpus the runs used)")
    rows = []
    for number, (question, chunk) in enumerate(todo, start=1):
        row = {"annotator": annotator, "source": JUDGE, "pool_id": pool.pool_id,
               "question_id": question.question_id, "document": question.document, "item_kind": "chunk",
               "item_id": chunk.item_id, "doc_id": chunk.doc_id, "start_char": chunk.start_char,
               "end_char": chunk.end_char, "model": model}
        rows.append({**row, **grade_chunk(client, question.text, str(chunk.text), params)})
        if progress is not None:
            progress(number, len(todo))
    return rows


def grade_chunk(client: LLMClient, question: str, passage: str, params: RelevanceJudgeParams) -> dict:
    """{relevance, valid, error, raw_reply} of one call."""
    prompt = PROMPT.format(question=question, passage=passage[: params.max_passage_chars])
    try:
        result = client.call(prompt, stage=STAGE, schema=RelevanceReply, system=SYSTEM,
                             max_tokens=params.max_tokens, cache_salt=PROMPT_VERSION)
    except LLMError as error:
        return {"relevance": None, "valid": False, "error": f"call failed: {error}", "raw_reply": None}
    if result.parsed is None:
        return {"relevance": None, "valid": False, "error": result.parse_error, "raw_reply": result.text}
    return {"relevance": result.parsed.grade, "valid": True, "error": None, "raw_reply": result.text}
