"""An experiment's configuration, one idea per module:

- ``models``: ExperimentConfig and its sections, validated strictly (what a user writes);
- ``judge_choice``: the judges an experiment can name and the spec of each mode it runs;
- ``specs``: component shorthands (`- bm25`, `auto` embedders) and resolution naming the field;
- ``grid``: GridPoint and ``expand_grid`` (the configurations a config describes);
- ``loading``: YAML files and `--set` overrides in, YAML out.

The names callers use are importable from here; the modules import one another, never this one.
"""

from ragkit.experiments.config.grid import GridPoint, expand_grid
from ragkit.experiments.config.judge_choice import (
    GENERATOR,
    MODE_ORDER,
    MODEL_MODES,
    JudgeChoice,
    judge_names,
    judge_specs,
)
from ragkit.experiments.config.loading import (
    PATH_FIELDS,
    config_from_dict,
    config_to_yaml,
    load_config,
    parse_override,
)
from ragkit.experiments.config.models import (
    CorpusConfig,
    DatasetConfig,
    ExperimentConfig,
    LLMConfig,
    point_switches,
)
from ragkit.experiments.config.specs import AUTO_EMBEDDER, resolve_auto_embedder

__all__ = [
    "AUTO_EMBEDDER",
    "GENERATOR",
    "MODEL_MODES",
    "MODE_ORDER",
    "PATH_FIELDS",
    "CorpusConfig",
    "DatasetConfig",
    "ExperimentConfig",
    "GridPoint",
    "JudgeChoice",
    "LLMConfig",
    "config_from_dict",
    "config_to_yaml",
    "expand_grid",
    "judge_names",
    "judge_specs",
    "load_config",
    "parse_override",
    "point_switches",
    "resolve_auto_embedder",
]
