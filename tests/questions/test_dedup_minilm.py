"""Near-duplicates with the real bundled MiniLM: a reworded question is caught, another is not."""

from __future__ import annotations

import pytest

from ragkit.questions.dedup import find_duplicates
from ragkit.questions.sources import minilm_embed

pytestmark = pytest.mark.integration


def test_minilm_finds_a_reworded_question_and_keeps_a_different_one():
    embed = minilm_embed()
    assert embed is not None
    questions = ["What is the size of the bovine coronavirus genome?",
                 "How large is the genome of bovine coronavirus?",
                 "Which hospitals were full in March?"]
    found = find_duplicates(questions, embed)
    assert [(d.index, d.of, d.how) for d in found] == [(1, 0, "embedding")]
    assert find_duplicates(questions) == []  # normalised text alone does not see it
