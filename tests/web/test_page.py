"""The browser page, in headless Chromium against a live ``koe serve`` app: streaming playback and Stop.

The page keeps what it measured on ``window.koe`` (milliseconds since the request was sent); the
AudioWorklet runs without a sound device, so "played" means rendered by the audio graph.
"""

from __future__ import annotations

import itertools
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from koe.agent.config import LLMConfig
from koe.agent.remote import RemoteSpeaker
from koe.agent.routes import create_agent_app
from koe.agent.service import VoiceAgent
from koe.client.target import parse_target
from koe.settings import Settings
from live_checks import wait_for
from live_server import LOOPBACK, LiveServer, run_server
from support.llm import HeldLLM, serve_agent

THREE_SENTENCES = (
    "The first sentence is short. The second one takes a little longer to write, token by token. "
    "And the third sentence ends the text."
)
LONG_TEXT = " ".join(["Every sentence here keeps the speaker busy for a while."] * 8)
WAIT_MS = 120_000
#: The pace of the read-aloud text, as an LLM writing it.
PAGE_TOKENS_PER_S = 20
#: Names a ``.png`` (``make screenshot``: the README's docs/agent-page.png) where the read-aloud test saves
#: its screenshot, with the figures the page shows in a ``.json`` beside it; unset, both go to artifacts/.
SCREENSHOT_VARIABLE = "KOE_SCREENSHOT"
SCREENSHOT_SCHEMA = "koe-page-screenshot/1"
_ROOT = Path(__file__).resolve().parents[2]


def read_aloud(page: Any, text: str, tokens_per_s: int) -> None:
    page.click("#tab-read")
    page.fill("#text", text)
    page.eval_on_selector(
        "#rate", f"(el) => {{ el.value = '{tokens_per_s}'; el.dispatchEvent(new Event('input')); }}"
    )
    page.click("#go")


def screenshot_path(artifacts: Path) -> Path:
    """Where the read-aloud screenshot goes: :data:`SCREENSHOT_VARIABLE`'s path (relative to the checkout),
    else ``artifacts/agent-page.png``."""
    named = os.environ.get(SCREENSHOT_VARIABLE, "")
    if not named:
        return artifacts / "agent-page.png"
    path = Path(named)
    if path.suffix != ".png":
        pytest.fail(f"{SCREENSHOT_VARIABLE} must name a .png file; got {named!r}")
    return path if path.is_absolute() else _ROOT / path


def save_screenshot(
    page: Any, path: Path, koe: dict[str, Any], tokens_per_s: int, load_at_start: float
) -> None:
    """The page as the listener saw it, at ``path``, and the figures it shows in ``path`` with ``.json``: so a
    caption quotes a committed file, not a picture, and the file says how loaded the machine was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    figures = {
        "schema": SCREENSHOT_SCHEMA,
        "command": f"{SCREENSHOT_VARIABLE}={os.environ.get(SCREENSHOT_VARIABLE, '')} pytest "
        "tests/web/test_page.py -k read_aloud",
        "taken_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "load_avg_1m": load_at_start,
            "load_avg_1m_end": os.getloadavg()[0],
        },
        "voice": page.eval_on_selector("#voice", "(el) => el.value"),
        "text": koe["answer"],
        "tokens_per_s": tokens_per_s,
        "timings_ms": koe["timings"],
        "gaps": koe["stalls"],
    }
    path.with_suffix(".json").write_text(json.dumps(figures, indent=2) + "\n")


def assert_reads_as_plain_text(page: Any) -> None:
    """A finished answer, all heard, in the page's ink at full opacity: nothing about it looks disabled."""
    # queried and read in one evaluation: the page may redraw the transcript between two of Playwright's
    # steps, and a detached span has no computed style
    styles = page.evaluate(
        """() => [...document.querySelectorAll('#transcript span')].map(
            (el) => [el.className, getComputedStyle(el).color, getComputedStyle(el).opacity])"""
    )
    ink = page.eval_on_selector("#transcript", "(el) => getComputedStyle(el).color")
    assert styles and all(style == ["heard", ink, "1"] for style in styles), (ink, styles)


def test_read_aloud_plays_highlights_its_words_and_stop_silences_it(
    koe_server: LiveServer, browser: Any, artifacts: Path
) -> None:
    shot, load_at_start = screenshot_path(artifacts), os.getloadavg()[0]
    page = browser.new_page(viewport={"width": 390, "height": 844})  # a phone
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("response", lambda response: response.status >= 400 and errors.append(response.url))
    page.goto(koe_server.http_url + "/")
    page.wait_for_function("window.koe && window.koe.state === 'ready'", timeout=WAIT_MS)
    icon = page.eval_on_selector("link[rel=icon]", "(el) => el.href")
    assert icon.startswith("data:image/svg+xml,")  # the icon travels inline: no request for /favicon.ico
    groups = page.eval_on_selector_all(
        "#voice optgroup", "(els) => els.map((e) => [e.label, e.children.length])"
    )
    assert groups[0] == ["American English", 20] and ["Japanese", 5] in groups and len(groups) == 9
    assert page.eval_on_selector("#voice", "(el) => el.value") == "af_heart"

    # playing mid-answer: the ask test below
    read_aloud(page, THREE_SENTENCES, tokens_per_s=PAGE_TOKENS_PER_S)
    page.wait_for_function("window.koe.timings.lastAudio !== undefined", timeout=WAIT_MS)
    koe = page.evaluate("window.koe")
    timings = koe["timings"]
    assert timings["firstToken"] <= timings["firstSegment"] <= timings["firstAudioQueued"]
    assert timings["firstAudioQueued"] <= timings["firstAudioPlayed"] <= timings["lastAudio"]
    assert koe["answer"] == THREE_SENTENCES and koe["simulated"]
    assert page.inner_text("tr[data-mark=firstAudioPlayed] td") == f"{timings['firstAudioPlayed']} ms"
    assert page.inner_text("#transcript") == THREE_SENTENCES
    lit = koe["spokenWords"]  # the word under the worklet's playback position was highlighted as it played
    assert len(lit) >= 5 and all(THREE_SENTENCES[w["span"][0] : w["span"][1]] == w["word"] for w in lit), lit
    assert [w["span"] for w in lit] == sorted(w["span"] for w in lit)
    assert page.is_visible("#answer-sim")
    assert_reads_as_plain_text(page)
    save_screenshot(page, shot, koe, PAGE_TOKENS_PER_S, load_at_start)

    read_aloud(page, LONG_TEXT, tokens_per_s=10)
    page.wait_for_function("window.koe.timings.firstAudioPlayed !== undefined", timeout=WAIT_MS)
    page.wait_for_function("window.koe.level > 0", timeout=WAIT_MS)  # audible
    page.click("#stop")
    frames_at_stop = page.evaluate("window.koe.audioFrames")
    page.wait_for_function("window.koe.log.includes('interrupted')", timeout=WAIT_MS)
    page.wait_for_timeout(1000)  # a second in which nothing may play
    after = page.evaluate("window.koe")
    assert after["state"] == "stopped" and after["clearedAck"]
    assert after["samplesAfterStop"] == 0 and after["level"] == 0 and after["queued"] <= 0
    assert after["audioFrames"] == frames_at_stop  # audio still in flight was dropped, not queued
    assert page.is_disabled("#stop")
    assert errors == []


def test_the_page_talks_to_an_agent_elsewhere_by_its_url_and_sends_a_jwt_as_agentcore_wants(
    fake_server: LiveServer, browser: Any
) -> None:
    """``/#agent=<wss URL>&token=<JWT>``: the page served by one server, the agent (``koe agent`` speaking
    through that server) on another; the voices come in the socket's first message, the token as the
    subprotocol pair, and every piece of a segment's audio lands after the one before."""
    speaker = RemoteSpeaker(parse_target(fake_server.ws_url, environ={}), ["af_heart", "bf_emma", "am_adam"])
    with run_server(
        create_agent_app(VoiceAgent(speaker, LLMConfig("none"))), Settings(host=LOOPBACK, port=0)
    ) as agent:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        protocols: list[str] = []
        page.on("websocket", lambda ws: protocols.append(ws.url))
        page.goto(f"{fake_server.http_url}/#agent={agent.ws_url}/ws&token=eyJhbGciOi.eyJzdWIi.c2ln")
        page.wait_for_function("window.koe && window.koe.state === 'ready'", timeout=WAIT_MS)
        options = page.eval_on_selector_all("#voice option", "(els) => els.map((el) => el.value)")
        assert options == ["af_heart", "am_adam", "bf_emma"]  # the agent's voices, grouped by language
        read_aloud(page, THREE_SENTENCES, tokens_per_s=40)
        page.wait_for_function("window.koe.timings.lastAudio !== undefined", timeout=WAIT_MS)
        koe = page.evaluate("window.koe")
    assert protocols == [f"{agent.ws_url}/ws"]  # the agent's socket, not the serving page's own
    assert koe["answer"] == THREE_SENTENCES and errors == []
    segments = koe["segments"]
    assert len(segments) >= 2 and koe["audioFrames"] > len(segments)  # segments came in several pieces
    assert segments[0]["start"] == 0 and all(s["start"] < s["end"] for s in segments)
    assert all(a["end"] == b["start"] for a, b in itertools.pairwise(segments))


def test_ask_mode_plays_the_answer_while_the_llm_still_writes_it_and_stop_closes_the_llm(
    browser: Any,
) -> None:
    """ "Ask the agent" with an LLM that holds all but its first sentence: the page plays that sentence
    while the rest is unwritten; Stop then interrupts the turn and closes the LLM's stream; asked again,
    the whole answer plays. (The fake engine speaks: the page, not the voice, is the point here.)"""
    llm = HeldLLM("A good name for a cat is Miso. ", "It is short and sweet. Cats answer to short names.")
    with llm.serving() as config, serve_agent(config) as live:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(live.http_url + "/")
        page.wait_for_function("window.koe && window.koe.state === 'ready'", timeout=WAIT_MS)
        assert page.evaluate("window.koe.mode") == "ask" and page.is_visible("#prompt")
        page.fill("#prompt", "What is a good name for a cat?")
        page.click("#go")
        page.wait_for_function("window.koe.level > 0", timeout=WAIT_MS)  # audible
        koe = page.evaluate("window.koe")
        assert koe["answer"] == llm.first and "done" not in koe["log"]  # played while the rest was held
        assert "lastToken" not in koe["timings"]  # the text has not finished: its row stays empty
        assert page.inner_text("tr[data-mark=lastToken] td") == "—"
        assert not koe["simulated"] and koe["timings"]["firstAudioPlayed"] >= koe["timings"]["firstToken"]

        page.click("#stop")
        page.wait_for_function("window.koe.log.includes('interrupted')", timeout=WAIT_MS)
        wait_for(lambda: llm.abandoned == 1, "the agent to close the LLM's stream")
        stopped = page.evaluate("window.koe")
        assert stopped["state"] == "stopped" and stopped["samplesAfterStop"] == 0

        llm.release.set()
        page.click("#go")
        page.wait_for_function("window.koe.timings.lastAudio !== undefined", timeout=WAIT_MS)
        answered = page.evaluate("window.koe")
        assert page.inner_text("#transcript") == llm.answer
        finished = answered["timings"]["lastToken"]
        assert answered["timings"]["firstToken"] <= finished <= answered["timings"]["lastAudio"]
        assert page.inner_text("tr[data-mark=lastToken] td") == f"{finished} ms"
    assert answered["answer"] == llm.answer and llm.answers == 2 and llm.abandoned == 1
    assert errors == []
