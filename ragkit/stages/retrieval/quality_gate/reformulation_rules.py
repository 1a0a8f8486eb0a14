"""The self-RAG verifier's rules for a reformulated query, as the context-enhancement design
writes them: an option of the quality gate's LLM verdict (``reformulation_rules: design``).

Off (``none``, the default) adds nothing to the gate's prompt. The rules are appended to the
verdict prompt (binary or scored) and name what a search query for the next attempt must keep,
add and leave out; the model's reply is read the same way with or without them. They only apply
in ``llm`` mode: in any other mode the option is not part of the gate's spec
(``QualityGateParams.key_dump``), so it does not enter a heuristic gate's run id.
"""

from __future__ import annotations

from typing import Literal

ReformulationRules = Literal["none", "design"]

RULES: dict[str, str] = {
    "none": "",
    "design": (
        "Rules for reformulated_query:\n"
        "1. Keep the question's intent and its key terms (names, numbers, settings).\n"
        "2. Add the words a passage that answers it would contain: function, class, option or file names, "
        "section titles.\n"
        "3. Replace pronouns and vague words with what they refer to; spell out abbreviations.\n"
        "4. Leave out question words and filler (what, how, please, tell me).\n"
        "5. Never repeat the question or a query already searched.\n"
        "6. One line of at most 12 words, no explanation."
    ),
}


def with_reformulation_rules(prompt: str, rules: ReformulationRules) -> str:
    """``prompt`` followed by the rules of ``rules`` (unchanged for ``none``)."""
    text = RULES[rules]
    return f"{prompt}\n{text}" if text else prompt
