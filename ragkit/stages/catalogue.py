"""The stages an experiment can name, grouped by role in pipeline order: what the New experiment
form lists, so the form reads like the pipeline it builds (chunking, query, retrieval, context,
answer) instead of an alphabetical list of judges."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ragkit.stages.base import STAGES
from ragkit.stages.roles import GROUP_TITLES, ROLES, in_pipeline_order, role_of


@dataclass(frozen=True)
class StageEntry:
    name: str
    role: str
    what: str  # the role's one-line description


@dataclass(frozen=True)
class StageGroup:
    group: str  # the package under ragkit/stages/
    title: str
    stages: tuple[StageEntry, ...]


def stage_groups(names: Iterable[str]) -> list[StageGroup]:
    """``names`` (registered stages, e.g. ``experiments.config.judge_names()``) grouped by their
    role's group, groups and stages in the order the pipeline runs them; empty groups left out."""
    roles = {role.name: role for role in ROLES}
    ordered = in_pipeline_order(STAGES.info(name) for name in names)
    groups: dict[str, list[StageEntry]] = {}
    for cls in ordered:
        role = roles[role_of(cls).name]
        groups.setdefault(role.group, []).append(StageEntry(cls.name, role.name, role.what))
    return [StageGroup(group, GROUP_TITLES[group], tuple(entries)) for group, entries in groups.items()]
