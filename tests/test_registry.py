"""The generic registry: built-ins from code, plugins from entry points, one-line errors.

The installed package metadata can be older than the code (an editable install made before a
module moved: here it is /work/main's), so the built-ins must not depend on it.
"""

from __future__ import annotations

import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path
from types import FunctionType
from typing import Any, ClassVar

import pytest

import ragkit.registry
from ragkit.chunkers import chunkers
from ragkit.chunkers.base import Chunker
from ragkit.embedders.base import Embedder, embedders
from ragkit.embedders.local import MiniLMEmbedder
from ragkit.errors import ConfigError
from ragkit.llms.base import LLMBackend, llms
from ragkit.registry import Component, Registry
from ragkit.retrievers import retrievers
from ragkit.retrievers.base import Retriever
from ragkit.web import WebProvider, web_providers

REPO = Path(__file__).resolve().parents[1]
KINDS = [(chunkers, Chunker), (embedders, Embedder), (retrievers, Retriever), (llms, LLMBackend),
         (web_providers, WebProvider)]


class Widget(Component):
    kind: ClassVar[str] = "widget"
    name: ClassVar[str] = "plugged"


def installed(monkeypatch, *points: Any) -> None:
    """Make ``points`` the only installed entry points, whatever the real metadata holds."""
    monkeypatch.setattr(ragkit.registry, "entry_points",
                        lambda group: [point for point in points if point.group == group])


@pytest.mark.unit
def test_a_built_in_loads_from_code_when_its_entry_point_is_stale_or_broken(monkeypatch):
    # What an editable install made before embeddings.py became embedders/ still says.
    installed(monkeypatch,
              EntryPoint("minilm", "ragkit.embeddings:MiniLMEmbedder", "ragkit.embedders"),
              EntryPoint("ollama", "no_such_module:Nothing", "ragkit.embedders"))
    monkeypatch.setattr(embedders, "_loaded", {})
    assert embedders.get("minilm") is MiniLMEmbedder
    assert embedders.get("ollama").__module__ == "ragkit.embedders.remote"
    assert embedders.names() == ["huggingface", "minilm", "minilm-onnx", "ollama", "openai"]


@pytest.mark.unit
def test_the_built_ins_work_with_no_metadata_at_all(monkeypatch):
    installed(monkeypatch)
    for registry, _ in KINDS:
        monkeypatch.setattr(registry, "_loaded", {})
        assert registry.names() == sorted(registry.builtins)
        assert all(registry.get(name).name == name for name in registry.names())


@pytest.mark.unit
def test_a_plugin_joins_through_its_entry_point(monkeypatch):
    class PluginPoint:
        name, group, value = "plugged", "ragkit.widgets", "some_plugin:Widget"

        def load(self) -> type[Widget]:
            return Widget

    installed(monkeypatch, PluginPoint())
    widgets: Registry[Widget] = Registry("widget", builtins={"builtin": "tests.nowhere:Widget"})
    assert widgets.names() == ["builtin", "plugged"]
    assert widgets.get("plugged") is Widget


@pytest.mark.unit
def test_a_plugin_that_cannot_be_imported_is_a_one_line_error_naming_its_entry_point(monkeypatch):
    installed(monkeypatch, EntryPoint("fancy", "no_such_plugin.chunkers:Fancy", "ragkit.chunkers"))
    with pytest.raises(ConfigError) as error:
        chunkers.build("fancy")
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("chunker 'fancy' is registered by the entry point 'no_such_plugin.chunkers:Fancy'")
    assert "ModuleNotFoundError" in message and "no_such_plugin" in message


@pytest.mark.unit
def test_an_unknown_name_lists_every_valid_choice(monkeypatch):
    installed(monkeypatch, EntryPoint("plugged", "some_plugin:Widget", "ragkit.widgets"))
    widgets: Registry[Widget] = Registry("widget", builtins={"b": "x:B", "a": "x:A"})
    with pytest.raises(ConfigError, match=r"^unknown widget 'zz'\. Valid choices: a, b, plugged\.$"):
        widgets.get("zz")


@pytest.mark.unit
def test_a_name_registered_at_run_time_wins_and_is_removed_after_the_block():
    with chunkers.registered("token", Widget):  # type: ignore[arg-type]
        assert chunkers.get("token") is Widget
    assert chunkers.get("token") is not Widget and chunkers.get("token").__module__ == "ragkit.chunkers.token"


@pytest.mark.unit
@pytest.mark.parametrize(("registry", "base"), KINDS, ids=[registry.kind for registry, _ in KINDS])
def test_every_built_in_is_its_kind_under_its_own_name_and_listed_in_pyproject(registry, base):
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"][registry.group]
    assert declared == dict(registry.builtins)
    for name in registry.builtins:
        cls = registry.get(name)
        assert issubclass(cls, base) and cls.name == name


class WidgetInfo(Component):
    """A built-in's light declarations, as ``ragkit.chunkers.params`` holds them."""

    kind: ClassVar[str] = "widget"
    name: ClassVar[str] = "light"
    version: ClassVar[int] = 3


@pytest.mark.unit
def test_info_reads_a_built_in_declarations_without_importing_its_class():
    # The class's module does not exist: any attempt to import it would raise.
    widgets: Registry[Widget, WidgetInfo] = Registry(
        "widget", builtins={"light": "tests.no_such_module:Widget"}, infos={"light": f"{__name__}:WidgetInfo"})
    assert widgets.info("light") is WidgetInfo
    assert widgets.resolve("light").params == {}
    with pytest.raises(ModuleNotFoundError):
        widgets.get("light")
    with widgets.registered("light", Widget):  # a class registered at run time is its own info
        assert widgets.info("light") is Widget


@pytest.mark.unit
@pytest.mark.parametrize("registry", [chunkers, retrievers], ids=["chunker", "retriever"])
def test_every_built_in_class_inherits_its_info_so_each_declaration_is_written_once(registry):
    assert set(registry.infos) == set(registry.builtins)
    for name in registry.builtins:
        info, cls = registry.info(name), registry.get(name)
        assert info is not cls and issubclass(cls, info) and info.name == name
        # Declarations, not methods (a classmethod such as a retriever's score_ceiling is behaviour).
        methods = (FunctionType, classmethod, staticmethod)
        declared = {attr for klass in info.__mro__ for attr, value in vars(klass).items()
                    if not attr.startswith("_") and not isinstance(value, methods)} - {"params"}
        assert {"kind", "name", "version", "Params"} <= declared
        # Nothing between the class and its info redeclares what the info says (a drifted copy).
        assert {attr: getattr(cls, attr) for attr in declared} == {attr: getattr(info, attr) for attr in declared}
        assert info.__module__.endswith(".params") and "llama_index" not in info.__module__
