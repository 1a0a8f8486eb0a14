"""The prompts of question generation and the JSON replies they ask for.

The answer is chosen first (a phrase of the passage, see ``sampling``) and the model only writes a
question it answers, copying the answer back: even a small model then yields an answer that is an
exact span of the document, and a reply whose answer is not in the passage is dropped, not fixed.
``PROMPT_VERSION`` is part of every call's cache key and of the set's record: change it with any
template, so old cached replies are not reused for new prompts.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ragkit.questions.generation.sampling import Slot
from ragkit.questions.language import language_name

PROMPT_VERSION = "qgen-3"

SYSTEM = ("You write questions for testing a search system. You reply with one JSON object only, "
          "no explanation.")

# Keys described, no literal template or example: a small model copies either into its reply
# (SmolLM2-135M answered "The answer, copied exactly from the passage" and "When did the bridge
# open?"). Backends that can constrain replies to the schema get it as well.
_REPLY = 'Reply as JSON with the keys "question" (your question) and "answer" (the answer above, copied exactly).'

TEMPLATES = {
    "factoid": (
        "Passage:\n{passage}\n\nAnswer: \"{answer}\"\n\n"
        "Write one question in {language} that this passage answers with exactly the answer above. "
        "The question must not contain the answer.\n"
        + _REPLY
    ),
    "paraphrase": (
        "Passage:\n{passage}\n\nAnswer: \"{answer}\"\n\n"
        "Write one question in {language} that this passage answers with exactly the answer above, "
        "as someone would ask who has not read the passage: use your own words and synonyms, not the "
        "passage's wording. The question must not contain the answer.\n"
        + _REPLY
    ),
    "multi_hop": (
        "Passage 1:\n{passage}\n\nAnswer 1: \"{answer}\"\n\nPassage 2:\n{passage_2}\n\nAnswer 2: \"{answer_2}\"\n\n"
        "Write one question in {language} that needs both answers: answer 1 from passage 1 and answer 2 "
        "from passage 2. The question must not contain either answer.\n"
        'Reply as JSON with the keys "question" (your question), "answer_1" and "answer_2" (the answers '
        'above, copied exactly).'
    ),
    "unanswerable": (
        "Passage:\n{passage}\n\n"
        "Write one question in {language} on the topic of this passage that the passage does NOT "
        "answer: it asks for a fact that is not given anywhere in the passage.\n"
        'Reply as JSON with the key "question" (your question).'
    ),
}


class QuestionReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    question: str = Field(min_length=1)
    answer: str = Field(default="", description="The answer copied from the passage; empty keeps the one given.")


class MultiHopReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    question: str = Field(min_length=1)
    answer_1: str = ""
    answer_2: str = ""


def reply_schema(kind: str) -> type[BaseModel]:
    return MultiHopReply if kind == "multi_hop" else QuestionReply


def build_prompt(slot: Slot, texts: dict[str, str], language: str | None) -> str:
    """The user message for one slot; ``texts`` maps doc id to document text."""
    passages = [texts[p.doc_id][p.start:p.end] for p in slot.passages]
    answers = [texts[p.doc_id][s:e] for p, (s, e) in zip(slot.passages, slot.answers)]
    fields = {"language": language_name(language), "passage": passages[0],
              "answer": answers[0] if answers else "",
              "passage_2": passages[1] if len(passages) > 1 else "",
              "answer_2": answers[1] if len(answers) > 1 else ""}
    return TEMPLATES[slot.type].format(**fields)


def estimate_tokens(text: str) -> int:
    """About four characters per token (English BPE vocabularies): a dry run's estimate, since
    counting exactly would load the model's tokenizer."""
    return max(1, round(len(text) / 4))
