"""Glue from a config to results: load the corpus and questions, plan, execute."""

from __future__ import annotations

from pathlib import Path

from ragkit.corpus.model import Corpus
from ragkit.corpus.store import CorpusStore
from ragkit.errors import ConfigError
from ragkit.experiments.config import ExperimentConfig, expand_grid
from ragkit.experiments.execution_report import ExecutionReport, Progress
from ragkit.experiments.executor import LocalExecutor
from ragkit.experiments.plan import Plan, make_plan, roles_calling_llm
from ragkit.llms.base import llms
from ragkit.llms.defaults import resolve_default_backend
from ragkit.questions import QuestionSet, load_question_set, resolve_answer_spans
from ragkit.questions.corpus import dataset_corpus_rows
from ragkit.registry import ComponentSpec
from ragkit.results import ResultStore


def load_corpus(config: ExperimentConfig, store: CorpusStore) -> Corpus:
    if config.corpus is None:
        documents = dataset_corpus_rows(config.dataset.path)
        if documents is None:
            raise ConfigError(
                f"dataset {config.dataset.path} ships no corpus.jsonl: set corpus.name (an ingested corpus) "
                "or corpus.path (files to ingest)"
            )
        return Corpus.from_documents(Path(config.dataset.path).name, documents)
    if config.corpus.name is not None:
        return store.load(config.corpus.name)
    assert config.corpus.path is not None  # CorpusConfig holds exactly one of name and path
    path = Path(config.corpus.path)
    report = store.ingest([path], name=_corpus_name_for(path))
    if not report.ok:
        raise ConfigError(f"corpus.path {path}: no file could be ingested")
    return store.load(report.corpus_name)


def _corpus_name_for(path: Path) -> str:
    cleaned = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in path.resolve().name)
    return cleaned.lstrip(".")[:64] or "corpus"


def questions_corpus(corpus: Corpus, questions: QuestionSet) -> Corpus:
    """The documents of ``corpus`` that ``questions`` are about: each question's relevant
    documents, the documents of its answer spans and its source document (``dataset.documents:
    questions``). A corpus of its own (its own id); an error when the questions name none of it."""
    wanted: set[str] = set()
    for question in questions.questions:
        wanted.update(question.relevant_docs)
        wanted.update(span.doc_id for span in question.spans)
        if question.source_doc:
            wanted.add(question.source_doc)
    kept = [document for document in corpus.documents if document.id_ in wanted]
    if not kept:
        raise ConfigError(f"dataset.documents: questions: the {len(questions.questions)} question(s) name no "
                          f"document of corpus '{corpus.name}' (use documents: all)")
    return Corpus.from_documents(corpus.name, kept)


def load_questions(config: ExperimentConfig, corpus: Corpus) -> QuestionSet:
    questions = load_question_set(
        config.dataset.path, format=config.dataset.format, split=config.dataset.split, limit=config.dataset.limit
    )
    return resolve_answer_spans(questions, corpus.texts_by_id())  # no LlamaIndex: records


def resolve_llm_roles(config: ExperimentConfig) -> dict[str, ComponentSpec]:
    """The backend of every role the grid calls an LLM for: the role's own spec, else
    `llm.default`, else (probed once) ollama when a server answers, else the embedded model."""
    llm = config.llm.resolved()
    roles = sorted({role for point in expand_grid(config) for role in roles_calling_llm(point)})
    automatic: ComponentSpec | None = None
    resolved = {}
    for role in roles:
        spec = llm.roles.get(role) or llm.default
        if spec is None:
            automatic = automatic or llms.resolve(resolve_default_backend())
            spec = automatic
        resolved[role] = spec
    return resolved


def check_llms(roles: dict[str, ComponentSpec]) -> None:
    """Stop before anything runs if a backend the grid needs cannot answer."""
    problems: dict[str, list[str]] = {}
    for role, spec in roles.items():
        problem = llms.build(spec).problem()
        if problem:
            problems.setdefault(problem, []).append(role)
    if problems:
        raise ConfigError("; ".join(f"LLM for {', '.join(roles)}: {problem}" for problem, roles in problems.items()))


def prepare(config: ExperimentConfig, check: bool = True) -> tuple[Plan, Path]:
    """The plan and the derived-data folder of its corpus (chunk sets, indexes).

    The LLMs are checked first (unless ``check`` is False, for a dry run): a backend that is
    down stops the run before anything is written, not even a corpus ingested."""
    roles = resolve_llm_roles(config)
    if check:
        check_llms(roles)
    store = CorpusStore()
    corpus = load_corpus(config, store)
    questions = load_questions(config, corpus)
    if config.dataset.documents == "questions":
        corpus = questions_corpus(corpus, questions)
    plan = make_plan(config, corpus, questions, roles)
    return plan, store.derived_dir(corpus.corpus_id)


EXECUTORS = ("local", "ray")


def make_executor(kind: str, derived_dir: Path, store: ResultStore, address: str | None = None,
                  num_cpus: int | None = None) -> LocalExecutor:
    """The executor named ``kind``: ``local`` (in this process) or ``ray``."""
    if kind == "local":
        if address is not None:
            raise ConfigError("--address is for --executor ray; the local executor runs in this process")
        return LocalExecutor(derived_dir, store)
    if kind == "ray":
        from ragkit.experiments.ray_executor import RayExecutor, require_ray

        require_ray()
        if num_cpus is not None and num_cpus < 1:
            raise ConfigError(f"--num-cpus must be at least 1, got {num_cpus}")
        return RayExecutor(derived_dir, store, address=address, num_cpus=num_cpus)
    raise ConfigError(f"unknown executor '{kind}'. Valid executors: {', '.join(EXECUTORS)}")


def run_experiment(config: ExperimentConfig, out_dir: Path, progress: Progress | None = None,
                   executor: str = "local", address: str | None = None, num_cpus: int | None = None
                   ) -> ExecutionReport:
    plan, derived_dir = prepare(config)
    runner = make_executor(executor, derived_dir, ResultStore(out_dir), address, num_cpus)
    return runner.execute(plan, progress or (lambda event, amount: None))
