"""Calibrate embedding groundedness's threshold on labelled COVID-QA cases, and report its accuracy.

Every COVID-QA answer is an exact span of its article. Labelled cases, one per answer sentence:

- supported: the sentence checked against the paragraph (the article's line) holding its span;
- unsupported: the same sentence checked against the answer paragraph of another question, drawn
  at random from a different article (topically close: every article is about coronaviruses).

The questions are split at random into two halves: the threshold maximising balanced accuracy
on the first half is chosen, and its accuracy is measured on the second. A script, not a test:

    python benchmarks/calibrate_grounding.py [--questions 400] [--seed 0] [--dataset DIR]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragkit.metrics.grounding import MIN_SENTENCE_WORDS
from ragkit.text import punkt_sentences

DEFAULT_DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "covidqa"


@dataclass(frozen=True)
class Case:
    question_id: str
    sentences: list[str]
    own_paragraph: str
    other_paragraph: str


def span_paragraph(text: str, start: int, end: int) -> str:
    """The lines of ``text`` holding [start, end)."""
    first = text.rfind("\n", 0, start) + 1
    last = text.find("\n", end)
    return text[first : len(text) if last < 0 else last]


def build_cases(dataset: Path, n_questions: int, rng: np.random.Generator) -> tuple[list[Case], int, int]:
    """Cases for ``n_questions`` random questions; also how many questions were eligible, of how many."""
    articles = {}
    with (dataset / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            articles[record["_id"]] = record["text"]
    questions = []
    total = 0
    with (dataset / "questions.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            total += 1
            question = json.loads(line)
            sentences = [s for s in punkt_sentences(question["answer"], MIN_SENTENCE_WORDS)
                         if len(s.split()) >= MIN_SENTENCE_WORDS]
            if sentences:
                text = articles[question["doc_id"]]
                paragraph = span_paragraph(text, question["answer_start"], question["answer_end"])
                questions.append((question, sentences, paragraph))
    chosen = [questions[i] for i in rng.choice(len(questions), size=min(n_questions, len(questions)), replace=False)]
    cases = []
    for question, sentences, paragraph in chosen:
        while True:
            other, _, other_paragraph = questions[rng.integers(len(questions))]
            if other["doc_id"] != question["doc_id"]:
                break
        cases.append(Case(question["id"], sentences, paragraph, other_paragraph))
    return cases, len(questions), total


def similarities(cases: list[Case], embed_model) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per case: the best support of each answer sentence in its own and in the other paragraph.

    Each distinct sentence is embedded once (a paragraph is one case's own and another's other).
    """
    paragraphs = {p: punkt_sentences(p, MIN_SENTENCE_WORDS)
                  for case in cases for p in (case.own_paragraph, case.other_paragraph)}
    sentences = [s for case in cases for s in case.sentences] + [s for v in paragraphs.values() for s in v]
    texts = list(dict.fromkeys(sentences))
    vectors = np.asarray(embed_model.get_text_embedding_batch(texts), dtype=np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    row = {text: index for index, text in enumerate(texts)}

    def support(sentences: list[str], paragraph: str) -> np.ndarray:
        answer = vectors[[row[s] for s in sentences]]
        context = vectors[[row[s] for s in paragraphs[paragraph]]]
        return (answer @ context.T).max(axis=1)

    return [(support(case.sentences, case.own_paragraph), support(case.sentences, case.other_paragraph))
            for case in cases]


def rates(supported: np.ndarray, unsupported: np.ndarray, threshold: float) -> tuple[float, float, float]:
    """(balanced accuracy, supported recall, unsupported recall) at ``threshold``."""
    tpr = float(np.mean(supported >= threshold))
    tnr = float(np.mean(unsupported < threshold))
    return (tpr + tnr) / 2, tpr, tnr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    args = parser.parse_args()

    from ragkit.embedders.base import embedders

    rng = np.random.default_rng(args.seed)
    cases, eligible, total = build_cases(args.dataset, args.questions, rng)
    started = time.perf_counter()
    scored = similarities(cases, embedders.build("minilm").embed_model())
    seconds = time.perf_counter() - started

    halves = rng.permutation(len(cases))
    calibration, heldout = halves[: len(cases) // 2], halves[len(cases) // 2 :]

    def pooled(indexes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (np.concatenate([scored[i][0] for i in indexes]), np.concatenate([scored[i][1] for i in indexes]))

    supported, unsupported = pooled(calibration)
    candidates = np.unique(np.round(np.concatenate([supported, unsupported]), 3))
    threshold = float(max(candidates, key=lambda t: rates(supported, unsupported, t)[0]))
    held_supported, held_unsupported = pooled(heldout)
    accuracy, tpr, tnr = rates(held_supported, held_unsupported, threshold)
    cal_accuracy = rates(supported, unsupported, threshold)[0]
    all_supported, all_unsupported = pooled(halves)

    print(f"eligible: {eligible} of {total} questions have an answer sentence of >= {MIN_SENTENCE_WORDS} words")
    print(f"cases: {len(cases)} questions, {len(all_supported)} supported + {len(all_unsupported)} unsupported "
          f"sentences (embedded in {seconds:.1f} s)")
    print(f"median best support: supported {np.median(all_supported):.3f}, "
          f"unsupported {np.median(all_unsupported):.3f}")
    print(f"threshold: {threshold:.2f}")
    print(f"balanced accuracy: calibration half {cal_accuracy:.3f}, held-out half {accuracy:.3f} "
          f"(supported recall {tpr:.3f}, unsupported recall {tnr:.3f})")


if __name__ == "__main__":
    main()
