"""``baseline:`` in an experiment: per factor, the level its other levels are tested against.

Named before any run, so the factor table's comparisons are fixed before the data are seen
(``ragkit.analysis.comparison``); a factor not named is tested against its first level as the
experiment lists it (judge modes: off first; top_k: the smallest). The names
are the runs table's factors: ``chunker``, ``embedder``, ``retriever``, ``top_k`` and
``judge.<name>``; a level is the component type (``token``), the k (``10``) or the judge mode
(``off``). Stored beside the results (``baselines.json``), never in a run id.
"""

from __future__ import annotations

from typing import Any, Protocol


class ExperimentGrid(Protocol):
    """What these checks read of an ExperimentConfig (a protocol, so the config imports this
    module and not the other way round)."""

    top_k: list[int]
    baseline: dict[str, str]

    def resolved_components(self) -> dict[str, Any]: ...


def grid_levels(config: ExperimentGrid, parts: dict[str, Any]) -> dict[str, list[str]]:
    """Each factor of the grid and its levels as the runs table names them (``parts``: the
    config's resolved components)."""
    levels = {
        "chunker": [spec.type for spec in parts["chunkers"]],
        "embedder": [spec.type for spec in parts["embedders"]],
        "retriever": [spec.type for spec in parts["retrievers"]],
        "top_k": [str(k) for k in config.top_k],
    }
    for name, specs in parts["judges"].items():
        levels[f"judge.{name}"] = [str(spec.params["mode"]) for spec in specs]
    return {factor: list(dict.fromkeys(names)) for factor, names in levels.items() if names}


def first_listed_levels(config: ExperimentGrid) -> dict[str, str]:
    """Each factor with more than one level: its first level as the experiment lists it."""
    levels = grid_levels(config, config.resolved_components())
    return {factor: names[0] for factor, names in levels.items() if len(names) > 1}


def check_baselines(config: ExperimentGrid, parts: dict[str, Any]) -> None:
    """A ValueError (one line, the valid choices listed) for a baseline naming a factor or a level
    the grid does not have."""
    levels = grid_levels(config, parts)
    for factor, level in config.baseline.items():
        if factor not in levels:
            raise ValueError(f"baseline: unknown factor '{factor}'. Valid factors: {', '.join(levels)}")
        if str(level) not in levels[factor]:
            raise ValueError(f"baseline: unknown level '{level}' of {factor}. "
                             f"Valid levels: {', '.join(levels[factor])}")
