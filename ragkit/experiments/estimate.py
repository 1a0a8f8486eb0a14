"""What running a plan would do, without doing it: the dry run behind `ragkit run --dry-run`.

It follows the executor's own rules, so its counts are what the run then does:

- a run computes only the questions the results folder lacks (same content keys as ``start``);
- an index is built only for a run with questions to answer, when its ready marker is missing;
  its chunk set is built then, if its parquet file is missing (and a Chunking-Judge chunk set
  also when the run needs its decisions and they are missing);
- chunks embedded are the distinct chunk texts of the indexes to build that the embedder's cache
  lacks, counted once per embedder across the plan (the first index fills the cache for the next).
  A chunk set not built yet is cut now, in memory, to count them: cheap for every chunker but
  the LLM ones (``llm_semantic``, summaries) and the Chunking Judge, whose chunks are then
  "unknown" rather than guessed; of those chunk texts, the ones longer than the embedder's window
  (the bundled MiniLM reads 256 of its tokens) are counted and named (``embedders.window``);
- LLM calls: one per question to answer per role that calls an LLM (judges in llm mode, the
  generator, the evaluation: one call per metric that needs one, per repeat; a stage whose design
  makes several says how many, ``StageInfo.llm_calls_per_question``: the Retrieval Judge's
  evaluate -> refine loop at its bound), plus the calls made once per chunk set or corpus (chunk
  summaries, document profiles, the router's summaries: ``estimate_builds``). Retries (a quality
  gate's, an answer check's correction) can add calls and the LLM cache can save some, so these
  are estimates and say so.

The time estimate multiplies these by what this machine measured (``throughput``) per embedder
and LLM backend. A component with no measurement yet is calibrated first (``calibrate=True``, the
default of ``dry_run``: ``CALIBRATION_CHUNKS`` chunks of the corpus embedded, one short prompt
sent; ``throughput.calibrate``); one that cannot be (a server that does not answer) says so
instead of inventing a rate.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ragkit.artefacts.chunksets import chunk_corpus, chunkset_path, decisions_path
from ragkit.artefacts.index import index_marker
from ragkit.chunkers.registry import chunkers
from ragkit.embedders.base import embedders
from ragkit.embedders.window import longer_than_window, window_note
from ragkit.experiments.estimate_builds import by_backend, profile_calls, router_summary_calls, summary_calls
from ragkit.experiments.plan import EVALUATION, Plan, RunStep, chunker_uses_llm, component_key
from ragkit.experiments.throughput import CALIBRATION, calibrate, read_throughput
from ragkit.llms.base import llms as llm_registry
from ragkit.metrics.generation import METRICS as GENERATION_METRICS
from ragkit.results import ResultStore
from ragkit.stages.base import STAGES as judge_registry

NO_MEASUREMENT = "no measurement yet"
# Chunks embedded, of CALIBRATION_CHARS characters each, to calibrate an embedder.
CALIBRATION_CHUNKS = 32
CALIBRATION_CHARS = 1000
CALIBRATION_PROMPT = [{"role": "user", "content": "In one short sentence: what is a search index?"}]
CALIBRATION_TOKENS = 32
LLM_CALLS_RULE = ("estimated: 1 call per question to answer per role (judges in llm mode, generator; the Retrieval "
                  "Judge's evaluate -> refine loop 2 x max_iterations - 1, and the groundedness judge's claims, "
                  "max_claims plus an LLM split, at their bound), and per LLM metric and "
                  "repeat for the evaluation; once per chunk for chunk summaries, per document for document "
                  "profiles and the router's per-document summaries and once for its corpus summary, where not "
                  "written yet; retries and corrections can add calls, the LLM cache can answer some without "
                  "the backend")


class StepEstimate(BaseModel):
    id: str
    cached: bool = Field(description="Already on disk: the run reads it.")
    needed: bool = Field(description="A run with questions to answer reads it (else the run does not touch it).")


class EmbedEstimate(BaseModel):
    embedder: str
    chunks: int | None = Field(description="Chunk texts of the indexes to build; None: unknown before chunking.")
    to_embed: int | None = Field(description="Of those, not yet in the embedding cache.")
    seconds: float | None = Field(description="From the measured chunks per second; None: no measurement yet.")
    measured: str = Field(description="The measurement used, or 'no measurement yet'.")
    window: str | None = Field(default=None, description="How many of these chunk texts the embedder cuts "
                               "short (ragkit.embedders.window); None: none, or a window ragkit does not know.")


class LLMEstimate(BaseModel):
    backend: str
    calls_by_role: dict[str, int]
    seconds: float | None
    measured: str


class PlanEstimate(BaseModel):
    """The dry run of one plan into one results folder."""

    experiment: str
    questions: int
    runs: int
    runs_to_compute: int
    questions_to_compute: int
    chunk_sets: list[StepEstimate]
    indexes: list[StepEstimate]
    chunk_sets_to_build: int
    indexes_to_build: int
    embedding: list[EmbedEstimate]
    llm: list[LLMEstimate]
    llm_calls_rule: str = LLM_CALLS_RULE
    seconds: float | None = Field(description="Embedding plus LLM time; None when a part has no measurement.")
    search: str | None = Field(default=None, description="With a search: block, what of this grid it may run.")

    @property
    def chunks_to_embed(self) -> int | None:
        counts = [e.to_embed for e in self.embedding]
        return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)

    @property
    def llm_calls(self) -> dict[str, int]:
        total: dict[str, int] = defaultdict(int)
        for entry in self.llm:
            for role, calls in entry.calls_by_role.items():
                total[role] += calls
        return dict(total)


def pending_questions(plan: Plan, store: ResultStore) -> dict[str, int]:
    """run id -> questions of the plan's set it has not committed at their current content."""
    done = store.completed_keys() if store.exists() else {}
    keys = [(q.id, q.content_key()) for q in plan.questions.questions]
    return {run.run_id: sum(1 for pair in keys if pair not in done.get(run.run_id, set())) for run in plan.runs}


def calls_per_question(run: RunStep) -> dict[str, int]:
    """role -> LLM calls one question costs (the rule in ``LLM_CALLS_RULE``)."""
    calls = {role: 1 for role in run.llms if role not in (EVALUATION, "chunking")}
    for role in calls:  # a stage whose design makes several calls a question says how many
        if (spec := run.point.judge(role)) is not None:
            calls[role] = judge_registry.info(role).llm_calls_per_question(spec.params)
    evaluation = run.point.evaluation
    if EVALUATION in run.llms and evaluation is not None:
        needing = [m for m in evaluation.metrics if GENERATION_METRICS[m].needs_llm]
        calls[EVALUATION] = len(needing) * evaluation.repeats
    return calls


def calibration_texts(plan: Plan) -> list[str]:
    """Up to ``CALIBRATION_CHUNKS`` pieces of the corpus's first documents, each as long as a chunk."""
    pieces: list[str] = []
    for batch in plan.corpus.batches(8):
        for text in batch.texts:
            pieces += [text[start:start + CALIBRATION_CHARS] for start in range(0, len(text), CALIBRATION_CHARS)]
            if len(pieces) >= CALIBRATION_CHUNKS:
                return pieces[:CALIBRATION_CHUNKS]
    return [piece for piece in pieces if piece.strip()] or ["calibration"]


def calibrate_missing(plan: Plan | None, embedder_specs: list[Any], llm_specs: list[Any],
                      data_dir: Path) -> list[str]:
    """Calibrate each embedder and LLM backend of ``*_specs`` this machine has not measured (an
    embedder on the texts of ``plan``'s corpus); returns one line per component that could not be
    (its problem)."""
    measured = read_throughput(data_dir)
    problems = []
    texts: list[str] | None = None
    for key, spec in {component_key(embedders, spec): spec for spec in embedder_specs}.items():
        if key in measured["embedders"]:
            continue
        texts = texts if texts is not None else calibration_texts(plan) if plan is not None else ["calibration"]
        embedder = embedders.build(spec)
        calibrate(data_dir, "embedders", key, spec.type, partial(_embed, embedder, ["warm up"]),
                  partial(_embed, embedder, texts))
    for key, spec in {component_key(llm_registry, spec): spec for spec in llm_specs}.items():
        if key in measured["llms"]:
            continue
        backend = llm_registry.build(spec)
        problem = backend.problem()
        if problem:
            problems.append(f"{spec.type}: not calibrated ({problem})")
            continue
        calibrate(data_dir, "llms", key, f"{spec.type}:{backend.model_name}", partial(_ask, backend),
                  partial(_ask, backend))
    return problems


def _per_call(rate: Any) -> str:
    return f"{rate.seconds_per_item:.2f} s/call over {rate.items} calls{_calibrated(rate)}"


def _calibrated(rate: Any) -> str:
    """Said of a measurement that is still the first-use calibration alone (a short prompt is faster
    than a run's: an LLM's figure is then a lower bound)."""
    return f", a first-use {CALIBRATION}" if rate.label.endswith(f"({CALIBRATION})") else ""


def _embed(embedder: Any, texts: list[str]) -> int:
    embedder.embed_texts(texts)
    return len(texts)


def _ask(backend: Any) -> int:
    backend.chat(CALIBRATION_PROMPT, json_schema=None, max_tokens=CALIBRATION_TOKENS)
    return 1


def estimate_plan(plan: Plan, derived_dir: Path, store: ResultStore, data_dir: Path,
                  calibrate_first: bool = False) -> PlanEstimate:
    pending = pending_questions(plan, store)
    active = [run for run in plan.runs if pending[run.run_id]]
    index_steps = {s.index_id: s for s in plan.index_steps}
    chunk_steps = {s.chunkset_id: s for s in plan.chunk_steps}
    db_dir = derived_dir / "lancedb"
    indexes_built = {run.index_id for run in active if not index_marker(db_dir, run.index_id).exists()}
    needed_chunksets = {index_steps[i].chunkset_id for i in indexes_built}
    done = store.completed_keys() if store.exists() else {}
    for run in active:  # a first shard carries the Chunking Judge's decisions (run_level_tables)
        if chunk_steps[run.chunkset_id].judge is not None and not done.get(run.run_id) \
                and not decisions_path(derived_dir, run.chunkset_id).exists():
            needed_chunksets.add(run.chunkset_id)
    cached_chunksets = {s.chunkset_id for s in plan.chunk_steps if chunkset_path(derived_dir, s.chunkset_id).exists()}
    once = summary_calls(plan, needed_chunksets - cached_chunksets, lambda spec: len(_cut(plan, spec))) \
        + profile_calls(plan, active, data_dir / "profiles") \
        + router_summary_calls(plan, active, data_dir / "summaries")
    if calibrate_first:
        calibrate_missing(plan, [index_steps[i].embedder for i in sorted(indexes_built)
                                 if index_steps[i].embedder is not None],
                          [run.llms[role] for run in active for role in calls_per_question(run)]
                          + [spec for spec, _ in by_backend(once).values()], data_dir)
    measured = read_throughput(data_dir)
    embedding = _embedding(plan, derived_dir, data_dir, [index_steps[i] for i in sorted(indexes_built)],
                           measured["embedders"])
    llm = _llm_calls(active, pending, measured["llms"], by_backend(once))
    parts = [e.seconds for e in embedding] + [e.seconds for e in llm]
    return PlanEstimate(
        experiment=plan.experiment, questions=len(plan.questions.questions), runs=len(plan.runs),
        runs_to_compute=len(active), questions_to_compute=sum(pending.values()),
        chunk_sets=[StepEstimate(id=s.chunkset_id, cached=s.chunkset_id in cached_chunksets,
                                 needed=s.chunkset_id in needed_chunksets) for s in plan.chunk_steps],
        indexes=[StepEstimate(id=s.index_id, cached=index_marker(db_dir, s.index_id).exists(),
                              needed=any(r.index_id == s.index_id for r in active)) for s in plan.index_steps],
        chunk_sets_to_build=len(needed_chunksets - cached_chunksets), indexes_to_build=len(indexes_built),
        embedding=embedding, llm=llm,
        seconds=None if any(p is None for p in parts) else sum(p for p in parts if p is not None),
    )


def _chunk_texts(plan: Plan, derived_dir: Path, chunkset_id: str) -> Any:
    """A chunk set's embedded texts and their keys (``text_sha``, ``embed_text``): read if built,
    cut in memory if cheap, else None."""
    import pandas as pd

    path = chunkset_path(derived_dir, chunkset_id)
    if path.exists():
        return pd.read_parquet(path, columns=["text_sha", "embed_text"])
    step = next(s for s in plan.chunk_steps if s.chunkset_id == chunkset_id)
    if step.judge is not None or chunker_uses_llm(step.chunker):
        return None
    return _cut(plan, step.chunker)[["text_sha", "embed_text"]]


def _cut(plan: Plan, chunker: Any) -> Any:
    """The corpus cut by ``chunker`` (a spec of a chunker that needs no LLM), in memory."""
    deps: dict[str, Any] = {}
    if chunker.type == "semantic":  # its breakpoints come from the bundled MiniLM, as in the executor
        deps["embed_model"] = embedders.build(embedders.resolve("minilm")).embed_model()
    return chunk_corpus(plan.corpus, chunkers.build(chunker, **deps))


def _embedding(plan: Plan, derived_dir: Path, data_dir: Path, steps: list[Any], measured: dict) -> list[EmbedEstimate]:
    from ragkit.embedders.cache import EmbeddingCache

    by_embedder: dict[str, list[Any]] = defaultdict(list)
    for step in steps:
        if step.embedder is not None:
            by_embedder[component_key(embedders, step.embedder)].append(step)
    out = []
    for key, group in by_embedder.items():
        texts: dict[str, str] | None = {}  # text key -> the text embedded
        chunks: int | None = 0
        for step in group:
            found = _chunk_texts(plan, derived_dir, step.chunkset_id)
            if found is None or texts is None or chunks is None:
                texts, chunks = None, None
                continue
            texts.update(zip(found["text_sha"], found["embed_text"], strict=True))
            chunks += len(found)
        to_embed = None
        window = None
        if texts is not None:
            cached = EmbeddingCache(data_dir / "embeddings", key).lookup(sorted(texts)) if texts else {}
            to_embed = len(texts) - len(cached)
            window = window_note(group[0].embedder.type, longer_than_window(group[0].embedder.type,
                                                                            list(texts.values())))
        rate = measured.get(key)
        seconds = None if rate is None or to_embed is None else to_embed / rate.per_second
        note = f"{rate.per_second:.1f} chunks/s over {rate.items} chunks{_calibrated(rate)}" if rate else NO_MEASUREMENT
        out.append(EmbedEstimate(embedder=group[0].embedder.type, chunks=chunks, to_embed=to_embed,
                                 seconds=0.0 if to_embed == 0 else seconds, measured=note, window=window))
    return out


def _llm_calls(active: list[RunStep], pending: dict[str, int], measured: dict,
               once: dict[str, tuple[Any, dict[str, int]]]) -> list[LLMEstimate]:
    """Per backend: the per-question calls of the active runs plus ``once`` (per corpus or chunk set)."""
    calls: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    specs = {}
    for key, (spec, roles) in once.items():
        specs[key] = spec
        for role, count in roles.items():
            calls[key][role] += count
    for run in active:
        for role, per_question in calls_per_question(run).items():
            key = component_key(llm_registry, run.llms[role])
            specs[key] = run.llms[role]
            calls[key][role] += per_question * pending[run.run_id]
    out = []
    for key, roles in calls.items():
        backend = llm_registry.build(specs[key])
        rate = measured.get(key)
        total = sum(roles.values())
        seconds = None if rate is None else total * rate.seconds_per_item
        note = _per_call(rate) if rate else NO_MEASUREMENT
        out.append(LLMEstimate(backend=f"{specs[key].type}:{backend.model_name}", calls_by_role=dict(roles),
                               seconds=seconds, measured=note))
    return out


def dry_run(config: Any, out_dir: Any, calibrate_first: bool = True) -> PlanEstimate:
    """The estimate of running ``config`` (an ExperimentConfig) into ``out_dir``. The LLM backends
    are resolved but not checked: a plan can be looked at while a server is down. Components this
    machine has not measured are calibrated first (``calibrate_missing``) unless ``calibrate_first``
    is False."""
    from ragkit.experiments.runner import prepare
    from ragkit.settings import get_settings

    plan, derived_dir = prepare(config, check=False)
    estimate = estimate_plan(plan, derived_dir, ResultStore(out_dir), get_settings().resolved_data_dir(),
                             calibrate_first)
    if config.search is not None:
        budget = "no budget" if config.search.budget is None else f"a budget of {config.search.budget:g} full runs"
        estimate.search = (f"search ({config.search.strategy}, {budget}): the counts above are the whole grid's; "
                           "the search runs part of it")
    return estimate


def format_estimate(estimate: PlanEstimate) -> str:
    """The dry run as text: one line per part, numbers first."""
    def sets(steps: list[StepEstimate]) -> str:
        cached = sum(s.cached for s in steps)
        return f"{len(steps)} ({cached} cached)"

    lines = [
        f"experiment '{estimate.experiment}' (dry run: nothing is computed or written; only a first-use "
        "calibration of the models' speed)",
        f"runs: {estimate.runs} x {estimate.questions} questions; to compute: {estimate.runs_to_compute} run(s), "
        f"{estimate.questions_to_compute} question(s)",
        f"chunk sets: {sets(estimate.chunk_sets)}; to build: {estimate.chunk_sets_to_build}",
        f"indexes: {sets(estimate.indexes)}; to build: {estimate.indexes_to_build}",
    ]
    for e in estimate.embedding:
        chunks = "unknown (an LLM chunker or the Chunking Judge cuts them)" if e.to_embed is None \
            else f"{e.to_embed} of {e.chunks} not in the embedding cache"
        lines.append(f"embed ({e.embedder}): {chunks}; {_time(e.seconds, e.measured)}")
        if e.window:
            lines.append(f"  note: {e.window}")
    if not estimate.embedding:
        lines.append("embed: nothing to embed")
    for entry in estimate.llm:
        roles = ", ".join(f"{role} {n}" for role, n in sorted(entry.calls_by_role.items()))
        lines.append(f"LLM calls ({entry.backend}): {roles}; {_time(entry.seconds, entry.measured)}")
    if estimate.llm:
        lines.append(f"  ({estimate.llm_calls_rule})")
    total = "unknown (some part has no measurement yet)" if estimate.seconds is None else f"~{estimate.seconds:.0f} s"
    lines.append(f"time (embedding + LLM calls, from this machine's measurements): {total}")
    advice = int8_advice({f"embed ({e.embedder})": e.seconds for e in estimate.embedding}
                         | {f"LLM calls ({e.backend})": e.seconds for e in estimate.llm})
    if advice:
        lines.append(advice)
    if estimate.search:
        lines.append(estimate.search)
    return "\n".join(lines)


def _time(seconds: float | None, measured: str) -> str:
    return f"time {NO_MEASUREMENT}" if seconds is None else f"~{seconds:.0f} s ({measured})"


# minilm-onnx int8 against minilm on its default runtime (ONNX Runtime, fp32), measured in
# benchmarks/README.md: CPU time per text (issue 32's frontier table, (b): 500 texts, load 2),
# and retrieval quality (SciFact, issue 32; the bundled sample, issue 41).
INT8_TIME_RATIO = 0.51
INT8_QUALITY = ("nDCG@10 on SciFact 0.6488 against 0.6451 (+0.004, all 5,183 documents), on the bundled "
                "COVID-QA sample 0.814 against 0.821 (-0.007); vectors 0.007 cosine from minilm's on average")
MINILM_STAGE = "embed (minilm)"


def int8_advice(stage_seconds: Mapping[str, float | None]) -> str | None:
    """The faster embedder, offered when embedding with ``minilm`` is most of the estimated time.

    ``stage_seconds``: stage name -> estimated seconds (None: no measurement); the bundled MiniLM's
    embedding is ``embed (minilm)``. The advice is given when that stage is more than half of the
    total and every stage is measured (otherwise "most of the time" is not known); it states
    int8's measured time ratio and quality cost, and that int8 is a different embedder (its own
    run ids and indexes)."""
    embedding = stage_seconds.get(MINILM_STAGE)
    if embedding is None or any(seconds is None for seconds in stage_seconds.values()):
        return None
    total = sum(seconds for seconds in stage_seconds.values() if seconds is not None)
    if total <= 0 or embedding <= total / 2:
        return None
    saved = embedding * (1 - INT8_TIME_RATIO)
    return (f"faster: embedding is {embedding / total:.0%} of the estimated time (embedding and LLM calls "
            f"only). minilm-onnx with precision int8 "
            f"(embedders: [{{type: minilm-onnx, params: {{precision: int8}}}}]) took {INT8_TIME_RATIO:.2f}x "
            f"minilm's CPU time per text (measured, benchmarks/README.md): about {saved:.0f} s less. Its cost, "
            f"measured: {INT8_QUALITY}. It is another embedder: new run ids and indexes, not minilm's cache.")


def llm_seconds(spec: Any, calls: int, data_dir: Path, calibrate_first: bool = True) -> tuple[float | None, str]:
    """How long ``calls`` calls of the backend ``spec`` take at this machine's measured seconds per
    call (calibrated first when it has none and ``calibrate_first``), and the measurement used;
    None and the reason when there is none."""
    key = component_key(llm_registry, spec)
    problems = calibrate_missing_llm(spec, data_dir) if calibrate_first else []
    rate = read_throughput(data_dir)["llms"].get(key)
    if rate is None:
        return None, problems[0] if problems else NO_MEASUREMENT
    return calls * rate.seconds_per_item, _per_call(rate)


def calibrate_missing_llm(spec: Any, data_dir: Path) -> list[str]:
    """``calibrate_missing`` for one LLM backend alone (no plan, no embedder)."""
    return calibrate_missing(None, [], [spec], data_dir)


def format_seconds(seconds: float | None, measured: str) -> str:
    """"~95 s (0.95 s/call over 100 calls)", or why there is no time."""
    return _time(seconds, measured)
