from __future__ import annotations

import pytest

from koe.cli import main


def test_koe_voices_lists_all_54_with_language_and_gender(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["voices"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("af_heart", "bm_lewis", "jf_alpha", "zm_yunyang", "pm_santa"))
    assert "Japanese" in out and "Mandarin Chinese" in out and "female" in out and "male" in out


def test_koe_voices_filters_by_language(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["voices", "--lang", "ja-JP"]) == 0
    out = capsys.readouterr().out
    assert "jf_alpha" in out and "jm_kumo" in out and "af_heart" not in out
