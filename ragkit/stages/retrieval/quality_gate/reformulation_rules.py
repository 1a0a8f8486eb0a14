"""How the self-RAG verifier reformulates a query: its heuristic rule and the LLM's rules.

The context-enhancement design's verifier reformulates without a model (``reformulation:
design``, heuristic mode): when the attempt found nothing, the first 5 words of the query (a
shorter, broader search); otherwise the query with terms appended, the ``expansion_terms`` most
frequent words of the attempt's top chunks that the query lacks. The gate's own heuristic rule
(``reformulation: keywords``, the default) is the query's keywords plus such words, more each
round (``quality_gate_scoring.expanded_query``).

The LLM verdict's rules below (``reformulation_rules``) are rules for the model's rewrite that the
design does not have (its verifier asks no model); they stay an option of the LLM verdict.

Off (``none``, the default) adds nothing to the gate's prompt. The rules are appended to the
verdict prompt (binary or scored) and name what a search query for the next attempt must keep,
add and leave out; the model's reply is read the same way with or without them. They only apply
in ``llm`` mode: in any other mode the option is not part of the gate's spec
(``QualityGateParams.key_dump``), so it does not enter a heuristic gate's run id.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from ragkit.text import keywords

if TYPE_CHECKING:
    from llama_index.core.schema import NodeWithScore

ReformulationRules = Literal["none", "design"]
Reformulation = Literal["keywords", "design"]
# The design's broader search when nothing was found: the query's first words.
FIRST_WORDS = 5

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


def design_reformulation(query: str, nodes: Sequence[NodeWithScore], terms: int, top: int) -> str:
    """The design's rule: nothing found -> the first ``FIRST_WORDS`` words of ``query``; else
    ``query`` and, appended, the ``terms`` most frequent words (3 letters or more, not stopwords,
    ties alphabetical) of the ``top`` first chunks that the query does not contain."""
    words = query.split()
    if not nodes:
        return " ".join(words[:FIRST_WORDS])
    have = set(keywords(query))
    counts = Counter(word for node in nodes[:top] for word in keywords(node.node.get_content())
                     if word not in have and len(word) > 2)
    added = [word for word, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))][:terms]
    return " ".join([*words, *added])
