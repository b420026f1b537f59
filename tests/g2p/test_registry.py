from __future__ import annotations

import threading
import time

import pytest

from koe.engine.timing import WordSpan
from koe.errors import AssetError, ConfigError
from koe.g2p import registry as registry_module
from koe.g2p.base import G2P
from koe.g2p.registry import G2PRegistry


class Counted:
    def __init__(self, lang: str) -> None:
        self.lang = lang

    def phonemize(self, text: str) -> str:
        return text

    def phonemize_words(self, text: str) -> tuple[str, list[WordSpan]]:
        return text, []


def slow_builders(calls: list[str]) -> dict[str, registry_module.Builder]:
    def build(lang: str) -> registry_module.Builder:
        def builder(registry: G2PRegistry) -> G2P:
            calls.append(lang)
            time.sleep(0.05)
            return Counted(lang)

        return builder

    return {lang: build(lang) for lang in ("en-us", "ja")}


def test_nothing_is_built_until_a_language_is_first_used() -> None:
    calls: list[str] = []
    registry = G2PRegistry(slow_builders(calls))
    assert calls == [] and registry.built() == ()
    assert registry.get("ja").lang == "ja"
    assert calls == ["ja"] and registry.built() == ("ja",)


def test_threads_needing_the_same_language_share_one_build() -> None:
    calls: list[str] = []
    registry = G2PRegistry(slow_builders(calls))
    got: list[G2P] = []
    threads = [threading.Thread(target=lambda: got.append(registry.get("ja"))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == ["ja"] and len({id(g) for g in got}) == 1


def test_prepare_builds_in_the_background() -> None:
    calls: list[str] = []
    registry = G2PRegistry(slow_builders(calls))
    registry.prepare("ja")
    registry.prepare("ja")  # already on its way: no second build
    deadline = time.monotonic() + 5
    while registry.built() != ("ja",) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert registry.built() == ("ja",) and calls == ["ja"]


def test_a_language_without_a_g2p_here_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="available: en-us, ja"):
        G2PRegistry(slow_builders([])).get("fr")


def test_a_missing_optional_dependency_names_the_command_that_installs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = registry_module.importlib.util.find_spec
    monkeypatch.setattr(
        registry_module.importlib.util,
        "find_spec",
        lambda name, *args: None if name == "pyopenjtalk" else real(name, *args),
    )
    registry = G2PRegistry()
    with pytest.raises(AssetError) as raised:
        registry.check("ja")
    assert raised.value.code == "language_unavailable"
    assert (
        "pyopenjtalk" in raised.value.message
        and "pip install --no-deps pyopenjtalk-plus" in raised.value.message
    )
    with pytest.raises(AssetError):
        registry.get("ja")
    registry.check("es")  # espeak needs nothing more


def test_installed_leaves_out_a_language_whose_dependency_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    real = registry_module.importlib.util.find_spec
    monkeypatch.setattr(
        registry_module.importlib.util,
        "find_spec",
        lambda name, *args: None if name == "jieba" else real(name, *args),
    )
    assert G2PRegistry().installed() == ("en-us", "en-gb", "es", "fr", "hi", "it", "ja", "pt-br")


def test_the_default_registry_builds_every_language() -> None:
    assert G2PRegistry().langs == ("en-us", "en-gb", "es", "fr", "hi", "it", "ja", "pt-br", "zh")
