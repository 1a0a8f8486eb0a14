"""Build the stages a configuration names, by the role each declares, for ``ragkit.pipeline.pipeline.Pipeline``.

The transforms are retrievers over the retriever, so they are built around it here, innermost
first; the chunking role runs in the plan's chunk step instead. Every other stage goes to the
pipeline, which runs it in its role. What a stage's constructor takes besides its params and LLM
(``Judge.needs``) comes from ``RESOURCES``, so a plugin stage gets the index or the embedder the
way enrichment does, without a line here naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragkit.errors import ConfigError
from ragkit.registry import ComponentSpec
from ragkit.stages.base import STAGES, Stage
from ragkit.stages.roles import check_single_roles, position, role_of

# What a stage may ask for in ``needs``: the retriever it wraps (transforms), the run's index and
# embedder, the corpus summary and each document's (the router), the document profiles (the
# profile judge). The executor provides each but the retriever.
RESOURCES = ("retriever", "index", "embedder", "summary", "document_summaries", "document_profiles")


@dataclass
class WiredStages:
    retriever: Any  # the base retriever, or the outermost transform around it
    retrieve_stage: str  # the stage name the search is timed under
    stages: list[Stage] = field(default_factory=list)  # the per-question stages, in pipeline order


def specs_in_role(specs: Sequence[ComponentSpec], role: str) -> list[ComponentSpec]:
    """The specs among ``specs`` whose stage runs in ``role``."""
    return [spec for spec in specs if role_of(STAGES.info(spec.type)).name == role]


def wire_stages(specs: Sequence[ComponentSpec], build: Callable[..., Stage], retriever: Any,
                resources: Mapping[str, Callable[[ComponentSpec], Any]]) -> WiredStages:
    """``specs``: the stages that are on (the generator too); ``build(spec, **needs)`` makes one;
    ``resources[name](spec)`` gives what a stage ``needs`` (all but the retriever)."""
    classes = {spec.type: STAGES.get(spec.type) for spec in specs}
    check_single_roles(list(classes.values()), "pipeline")
    wired = WiredStages(retriever, "retrieve")
    transforms: list[str] = []
    for spec in sorted(specs, key=lambda spec: position(classes[spec.type])):
        cls = classes[spec.type]
        role = role_of(cls).name
        if role == "chunking":
            continue
        needs: dict[str, Any] = {}
        for need in cls.needs:
            if need == "retriever":
                needs[need] = wired.retriever
            elif need in resources:
                needs[need] = resources[need](spec)
            else:
                raise ConfigError(f"judges: '{cls.name}' needs '{need}', which the pipeline does not provide. "
                                  f"Provided: {', '.join(RESOURCES)}")
        stage = build(spec, **needs)
        if role == "transform":
            wired.retriever = stage
            transforms.append(cls.name)
        else:
            wired.stages.append(stage)
    if transforms:
        wired.retrieve_stage = "judge:" + "+".join(transforms)
    return wired
