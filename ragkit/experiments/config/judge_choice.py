"""Which judges an experiment can name, how a judge's modes are written, and the resolved spec
of each mode the grid runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, model_validator

from ragkit.errors import ConfigError
from ragkit.experiments.config.specs import StrictModel, resolve_at
from ragkit.quoting import clipped
from ragkit.registry import ComponentSpec
from ragkit.stages.base import STAGES as judge_registry
from ragkit.stages.roles import role_of

if TYPE_CHECKING:
    from ragkit.stages.base import StageInfo

# The generator answers questions; it is configured by `generator`, not toggled as a judge.
GENERATOR = "generator"
# The order grid points and pairs list a judge's modes in: off (the baseline) first.
MODE_ORDER = ("off", "heuristic", "llm", "cross_encoder", "nli")
# Modes that load a local model folder (a judge's model_path / nli_model_path must be set).
MODEL_MODES = ("cross_encoder", "nli")


def judge_names() -> list[str]:
    """The judges an experiment can name: registered stages with a role the pipeline runs (the
    generator's role is configured by ``generator``)."""
    return [name for name in judge_registry.names() if is_judge(name)]


def is_judge(name: str) -> bool:
    """``name`` is one of ``judge_names()``; imports that stage's module only (names are cheap,
    classes are not: a config names a few of them)."""
    return name in judge_registry.names() and role_name(name) not in (None, "generate")


def role_name(name: str) -> str | None:
    """The role a registered stage declares, or None when it declares none the pipeline has (or
    its plugin fails to import: naming it then shows why)."""
    try:
        return role_of(judge_registry.info(name)).name
    except (ConfigError, ImportError, AttributeError):
        return None


def check_judge_roles(names: list[str], where: str = "judges") -> None:
    """A one-line ConfigError naming the valid roles for a registered stage among ``names`` that
    declares no role the pipeline has (a plugin's), which would otherwise validate and never run;
    names nobody registered are left to the caller."""
    registered = set(judge_registry.names())
    for name in names:
        if name in registered:
            role_of(judge_registry.info(name), where)


class JudgeChoice(StrictModel):
    """Which modes of one judge the grid runs, and the judge's parameters.

    Written as `retrieval: llm`, `retrieval: both` (off and the judge's strongest mode),
    `{mode: [off, heuristic, llm], params: {...}}` or `{enabled: true|false|both}`.
    """

    mode: list[str] = Field(min_length=1, description="Modes to run: off, heuristic, llm, or both (off + strongest).")
    params: dict[str, Any] | list[dict[str, Any]] = Field(
        default_factory=dict,
        description="The judge's parameters (except mode); a list of parameter sets runs each one "
        "(e.g. [{on_fail: off}, {on_fail: re_retrieve}] to toggle an option of the judge).",
    )

    def variants(self) -> list[dict[str, Any]]:
        return self.params if isinstance(self.params, list) else [self.params]

    @model_validator(mode="before")
    @classmethod
    def _short_forms(cls, value: Any) -> Any:
        if isinstance(value, (str, bool, list)):
            value = {"mode": value}
        if isinstance(value, dict) and "enabled" in value:
            value = dict(value)
            enabled = value.pop("enabled")
            if "mode" in value:
                raise ValueError("give either 'enabled' or 'mode', not both")
            value["mode"] = {True: "on", False: "off"}.get(enabled, enabled)
        if isinstance(value, dict) and not isinstance(value.get("mode"), list) and "mode" in value:
            value = {**value, "mode": [value["mode"]]}
        if isinstance(value, dict) and isinstance(value.get("mode"), list):
            # YAML 1.1 reads an unquoted off / on as a boolean: [off, llm] arrives as [False, "llm"].
            value = {**value, "mode": [{False: "off", True: "on"}.get(m, m) if isinstance(m, bool) else m
                                       for m in value["mode"]]}
        return value


def judge_specs(name: str, choice: JudgeChoice) -> list[ComponentSpec]:
    """One resolved spec per mode, in the order off, heuristic, llm; `both`/`on` expanded."""
    cls: type[StageInfo] = judge_registry.info(name)
    strongest = "llm" if "llm" in cls.modes else cls.modes[-1]
    variants = choice.variants()
    if not variants:
        raise ConfigError(f"judges.{name}: params is an empty list; give one parameter set or more")
    if any("mode" in params for params in variants):
        raise ConfigError(f"judges.{name}: set the mode with 'mode', not inside params")
    modes: set[str] = set()
    for mode in choice.mode:
        mode = str(mode).lower()
        shorthands = {"both": ["off", strongest], "on": [strongest], "true": [strongest], "false": ["off"]}
        expanded = shorthands.get(mode, [mode])
        for item in expanded:
            if item not in cls.modes:
                valid = ", ".join([*cls.modes, "both"])
                raise ConfigError(f"judges.{name}: no mode '{clipped(item)}'. Valid modes: {valid}")
            modes.add(item)
    ordered = [mode for mode in MODE_ORDER if mode in modes]
    specs: dict[str, ComponentSpec] = {}
    for mode in ordered:
        # A judge that is off has no parameters in effect: one off spec whatever the variants.
        for params in variants[:1] if mode == "off" else variants:
            spec = resolve_at(f"judges.{name}", judge_registry.resolve,
                              {"type": name, "params": {**params, "mode": mode}})
            specs.setdefault(spec.model_dump_json(), spec)
    return list(specs.values())
