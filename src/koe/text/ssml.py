"""An SSML subset, read into koe's own text and inline markup, every character pointing at the SSML it came
from.

A text that starts with ``<speak`` is SSML. It is parsed whole (:func:`read`) by the standard library's
expat, with no document type (so no entity is ever declared or expanded), at most :data:`MAX_DEPTH` deep
and :data:`MAX_ELEMENTS` elements; what it says becomes the text and markup the rest of koe already
speaks: ``<break>`` a ``[pause:…]``, ``<phoneme>`` a ``[word](/phonemes/)`` (IPA mapped to Kokoro's
symbols), ``<sub>`` its alias, ``<say-as>`` the form the normalizer reads, ``<p>`` and ``<s>`` line breaks
(a segment ends there). ``<prosody rate>`` and ``<lang>`` (and ``<speak xml:lang>``) give their span a
:class:`Style` of its own, a segment ending at each of its edges. Any other element is read as its text.
Malformed SSML is an ``invalid_markup`` error with its line and column, never audio of its tags.
docs/pronunciation.md lists what is read how.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from xml.parsers import expat

from koe.errors import ConfigError
from koe.languages import language
from koe.text.markup import INVALID_MARKUP, MAX_PHONEME_CHARS, MAX_WORD_CHARS, pause_seconds
from koe.text.normalize import Alignment
from koe.text.segment import Segment

#: Elements nested deeper than this, or more of them than this, are refused: bounded work and memory.
MAX_DEPTH = 32
MAX_ELEMENTS = 2_000
#: ``<break strength>`` as seconds of pause (a sentence's own pause is about 0.3 s).
STRENGTHS = {"none": 0.0, "x-weak": 0.1, "weak": 0.2, "medium": 0.4, "strong": 0.7, "x-strong": 1.2}
#: IPA written the way Kokoro's alphabet writes it: its one-symbol diphthongs and affricates, and the
#: letters IPA spells otherwise; a tie bar and syllable dots go (a dot would be a sentence's end).
_IPA = {
    "eɪ": "A", "aɪ": "I", "oʊ": "O", "əʊ": "Q", "aʊ": "W", "ɔɪ": "Y", "dʒ": "ʤ", "tʃ": "ʧ", "ɝ": "ɜɹ",
    "r": "ɹ", "g": "ɡ", "ɫ": "l", "ʍ": "w", "'": "ˈ", "\u0361": "", ".": "",
}  # fmt: skip
_IPA_SYMBOL = re.compile("|".join(sorted(map(re.escape, _IPA), key=len, reverse=True)))
#: Kokoro's own alphabet (misaki's), taken as written.
_KOKORO = frozenset({"kokoro", "x-kokoro", "misaki"})
_ORDINAL = re.compile(r"\d{1,12}")
#: ``<prosody rate>``'s words as a multiple of the voice's speed.
RATES = {"x-slow": 0.6, "slow": 0.8, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.5}
#: ``<prosody rate>`` as a percentage of the normal rate (``80%``), a change of it (``+20%``) or a multiple
#: (``1.2``).
_RATE = re.compile(r"(?P<sign>[+-]?)(?P<number>\d{1,4}(?:\.\d{1,4})?)(?P<percent>%?)")
#: The styled elements: a segment ends at each of their edges.
_STYLING = frozenset({"prosody", "lang"})
_SPEAK = re.compile(r"\s*<speak[\s>/]")


def is_ssml(text: str) -> bool | None:
    """Whether ``text`` is SSML (it starts with ``<speak``); None while the start so far may become it."""
    if _SPEAK.match(text):
        return True
    start = text.lstrip()
    return None if "<speak".startswith(start) else False


@dataclass(frozen=True, slots=True)
class Style:
    """How a span of SSML is spoken when not as the turn's voice speaks: ``rate`` times its speed, and in
    ``lang`` (koe's code; None: the turn's) by a voice of that language."""

    rate: float = 1.0
    lang: str | None = None


PLAIN = Style()


@dataclass(frozen=True, slots=True)
class Read:
    """What an SSML document says: ``text`` (koe's text and inline markup) and, per character of it, the
    span of the SSML it came from; ``styles``: where in ``text`` each :class:`Style` starts (the first at
    0), in order."""

    text: str
    alignment: Alignment
    styles: tuple[tuple[int, Style], ...] = ((0, PLAIN),)

    def style_at(self, at: int) -> Style:
        """The style of ``text``'s character ``at``."""
        return self.styles[bisect.bisect_right(self.styles, at, key=lambda change: change[0]) - 1][1]

    def parts(self) -> list[tuple[str, Style]]:
        """``text`` in its spans of one style each, in order."""
        edges = [at for at, _ in self.styles[1:]] + [len(self.text)]
        return [(self.text[at:end], style) for (at, style), end in zip(self.styles, edges, strict=True)]


def located(segment: Segment, read: Read, ssml: str) -> Segment:
    """``segment``, cut from ``read.text``, pointed at the SSML ``ssml`` it was read from: its span, its
    text and each spoken character's span are the SSML's (word timings then point at what was written,
    a ``<sub>`` element for its alias)."""
    starts, ends = read.alignment.starts, read.alignment.ends
    last = len(starts) - 1

    def span(start: int, end: int) -> tuple[int, int]:
        first = starts[start] if start <= last else ends[last]
        return first, (ends[min(end, last + 1) - 1] if end > start else first)

    a, b = span(*segment.source_span)
    spans = [
        span(start, end) for start, end in zip(segment.alignment.starts, segment.alignment.ends, strict=True)
    ]
    return Segment(
        text=ssml[a:b],
        spoken_text=segment.spoken_text,
        source_span=(a, b),
        index=segment.index,
        is_first=segment.is_first,
        alignment=Alignment(tuple(s for s, _ in spans), tuple(e for _, e in spans)),
    )


@dataclass(slots=True)
class _Event:
    kind: str  # "start", "end" or "text"
    at: int  # the character where it starts in the SSML
    name: str = ""
    attrs: dict[str, str] = field(default_factory=dict)
    data: str = ""


def read(ssml: str) -> Read:
    """Read the SSML document ``ssml`` (see the module's docstring).

    Raises:
        ConfigError: ``invalid_markup``: not well-formed XML, a root other than ``<speak>``, a document
            type, nesting past :data:`MAX_DEPTH` or more than :data:`MAX_ELEMENTS` elements, or an element
            koe cannot honour (a ``<break>`` too long, a ``<phoneme>`` in another alphabet); the message
            says where.
    """
    events = _parse(ssml)
    out = _Out(ssml)
    stack: list[tuple[_Event, list[tuple[str, int, int]]]] = []  # open elements, the text each collects
    for event, end in zip(events, _ends(events, len(ssml)), strict=True):
        if event.kind == "text":
            if stack and stack[-1][0].name in _COLLECTING:
                stack[-1][1].append((event.data, event.at, end))
            else:
                out.text(event.data, event.at, end)
        elif event.kind == "start":
            if stack and stack[-1][0].name in _COLLECTING:
                stack.append((event, stack[-1][1]))  # its text belongs to the collecting element
                continue
            stack.append((event, []))
            _open(event, end, out)
        else:
            opened, collected = stack.pop()
            if stack and collected is stack[-1][1]:
                continue
            _close(opened, collected, end, out)
    return Read("".join(out.chars), Alignment(tuple(out.starts), tuple(out.ends)), tuple(out.styles))


#: Elements whose text is said otherwise than as written: gathered, then said at their end.
_COLLECTING = frozenset({"sub", "phoneme", "say-as"})


class _Out:
    """The text being built, each character with the SSML span it stands for."""

    def __init__(self, ssml: str) -> None:
        self.ssml = ssml
        self.chars: list[str] = []
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.styles: list[tuple[int, Style]] = [(0, PLAIN)]
        self._open_styles: list[Style] = [PLAIN]  # one per open element, styled or not

    def restyle(self, style: Style, start: int, end: int) -> None:
        """The text from here on is spoken in ``style`` (an element opened; the open one's, one closed), a
        segment ending here when that changes how it is spoken."""
        if style == self.styles[-1][1]:
            return
        self.said("\n", start, end)
        self.styles.append((len(self.chars), style))

    def enter(self, event: _Event) -> None:
        style = _styled(self._open_styles[-1], event)
        self._open_styles.append(style)
        self.restyle(style, event.at, event.at)

    def leave(self, at: int) -> None:
        self._open_styles.pop()
        self.restyle(self._open_styles[-1], at, at)

    def text(self, data: str, start: int, end: int) -> None:
        """``data``, read from ``[start, end)`` of the SSML."""
        for ch, first, last in self.located(data, start, end):
            self.put(ch, first, last)

    def located(self, data: str, start: int, end: int) -> list[tuple[str, int, int]]:
        """Each character of ``data``, read from ``[start, end)``, with its span: its own where it is written
        so, the whole span where an entity or a character reference stands for it."""
        if self.ssml[start:end] == data:
            return [(ch, start + k, start + k + 1) for k, ch in enumerate(data)]
        return [(ch, start, end) for ch in data]

    def said(self, text: str, start: int, end: int) -> None:
        for ch in text:
            self.put(ch, start, end)

    def put(self, ch: str, start: int, end: int) -> None:
        self.chars.append(ch)
        self.starts.append(start)
        self.ends.append(end)


def _open(event: _Event, end: int, out: _Out) -> None:
    out.enter(event)
    if event.name == "break":
        milliseconds = round(_break_s(event) * 1000)
        out.said(f" [pause:{milliseconds}ms] " if milliseconds else " ", event.at, end)
    elif event.name == "p":
        out.said("\n", event.at, end)


def _close(opened: _Event, collected: list[tuple[str, int, int]], end: int, out: _Out) -> None:
    _said_at_close(opened, collected, end, out)
    out.leave(end)


def _said_at_close(opened: _Event, collected: list[tuple[str, int, int]], end: int, out: _Out) -> None:
    name, attrs = opened.name, opened.attrs
    if name in ("p", "s"):
        out.said("\n", opened.at, end)
    elif name == "sub":
        out.said(f" {attrs.get('alias', '')} ", opened.at, end)
    elif name == "phoneme":
        word = "".join(data for data, _, _ in collected).strip()
        if not word or len(word) > MAX_WORD_CHARS or re.search(r"[\[\]\n]", word):
            raise _error(f"expected a <phoneme> around one word or name of at most {MAX_WORD_CHARS} "
                         "characters without brackets", opened.at)  # fmt: skip
        chars = [c for data, start, stop in collected for c in out.located(data, start, stop)]
        while chars[0][0].isspace():
            chars.pop(0)
        while chars[-1][0].isspace():
            chars.pop()
        out.said(" [", opened.at, end)
        for ch, start, stop in chars:
            out.put(ch, start, stop)
        out.said(f"](/{_phonemes(opened)}/) ", opened.at, end)
    elif name == "say-as":
        text = "".join(data for data, _, _ in collected)
        start = collected[0][1] if collected else opened.at
        out.said(f" {_say_as(attrs.get('interpret-as', ''), text.strip())} ", start, end)


def _styled(outer: Style, event: _Event) -> Style:
    """The style inside ``event``'s element, within ``outer``: a rate multiplies the outer one; a language
    (``xml:lang``, on ``<lang>`` or the root) replaces it."""
    if event.name not in _STYLING and event.name != "speak":
        return outer
    style = outer
    code = event.attrs.get("xml:lang")
    if code is not None:
        try:
            style = Style(style.rate, language(code).code)
        except ConfigError as exc:
            raise _error(f"<{event.name} xml:lang>: {exc.message}", event.at) from exc
    rate = event.attrs.get("rate")
    if event.name == "prosody" and rate is not None:
        style = Style(style.rate * _rate(rate, event.at), style.lang)
    return style


def _rate(rate: str, at: int) -> float:
    """``<prosody rate>`` as a multiple of the speed."""
    word = rate.strip().lower()
    if word in RATES:
        return RATES[word]
    found = _RATE.fullmatch(word)
    if found is None:
        raise _error(
            f"expected <prosody rate> one of {', '.join(RATES)}, a percentage (80%, +20%) or a multiple "
            f"(1.2), got {rate[:40]!r}",
            at,
        )
    number = float(found["number"])
    if not found["percent"]:
        value = number if not found["sign"] else 1.0 + (number if found["sign"] == "+" else -number)
    elif found["sign"]:
        value = 1.0 + (number if found["sign"] == "+" else -number) / 100
    else:
        value = number / 100
    if value <= 0:
        raise _error(f"expected <prosody rate> above zero, got {rate[:40]!r}", at)
    return value


def _break_s(event: _Event) -> float:
    time = event.attrs.get("time")
    if time is not None:
        try:
            return pause_seconds(time)
        except ConfigError as exc:
            raise _error(f"<break time>: {exc.message}", event.at) from exc
    strength = event.attrs.get("strength", "medium")
    if strength not in STRENGTHS:
        raise _error(f"expected <break strength> one of {', '.join(STRENGTHS)}, got {strength!r}", event.at)
    return STRENGTHS[strength]


def _phonemes(event: _Event) -> str:
    ph = event.attrs.get("ph", "")
    alphabet = event.attrs.get("alphabet", "ipa").lower()
    if alphabet == "ipa":
        ph = _IPA_SYMBOL.sub(lambda m: _IPA[m.group()], ph)
    elif alphabet not in _KOKORO:
        raise _error(f"expected <phoneme alphabet> ipa or kokoro, got {alphabet!r}", event.at)
    ph = " ".join(ph.split())
    if not ph or len(ph) > MAX_PHONEME_CHARS or "/" in ph:
        raise _error(f"expected <phoneme ph> of 1 to {MAX_PHONEME_CHARS} symbols", event.at)
    return ph


def _say_as(interpret_as: str, text: str) -> str:
    """``text`` as ``interpret-as`` says: spelled out, digit by digit, or an ordinal; the other kinds
    (cardinal, date, time, telephone) are what koe's normalizer already reads in their written forms."""
    if interpret_as in ("characters", "spell-out", "verbatim"):
        return " ".join(ch.upper() if ch.isalpha() else ch for ch in text if not ch.isspace())
    if interpret_as == "digits":
        return " ".join(ch for ch in text if not ch.isspace())
    if interpret_as == "ordinal" and _ORDINAL.fullmatch(text):
        return text + _ordinal_suffix(int(text))
    return text


def _ordinal_suffix(number: int) -> str:
    if number % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")


def _parse(ssml: str) -> list[_Event]:
    """The document's events in order, each with the character it starts at."""
    parser = expat.ParserCreate()
    parser.buffer_text = False
    events: list[_Event] = []
    byte_at = _byte_offsets(ssml)
    depth = 0
    elements = 0

    def at() -> int:
        return bisect.bisect_left(byte_at, parser.CurrentByteIndex)

    def start(name: str, attrs: dict[str, str]) -> None:
        nonlocal depth, elements
        depth += 1
        elements += 1
        if not events and name != "speak":
            raise _error(f"expected the root element <speak>, got <{name}>", at())
        if depth > MAX_DEPTH:
            raise _error(f"expected elements nested at most {MAX_DEPTH} deep", at())
        if elements > MAX_ELEMENTS:
            raise _error(f"expected at most {MAX_ELEMENTS} elements", at())
        events.append(_Event("start", at(), name.lower(), attrs))

    def end(name: str) -> None:
        nonlocal depth
        depth -= 1
        events.append(_Event("end", at(), name.lower()))

    def text(data: str) -> None:
        events.append(_Event("text", at(), data=data))

    def doctype(*_: object) -> None:
        raise _error("expected no document type declaration", at())

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text
    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = doctype
    try:
        parser.Parse(ssml.encode("utf-8"), True)
    except expat.ExpatError as exc:
        raise ConfigError(
            f"expected well-formed SSML, got {expat.ErrorString(exc.code)} at line {exc.lineno}, "
            f"column {exc.offset}",
            code=INVALID_MARKUP,
        ) from exc
    return events


def _ends(events: list[_Event], length: int) -> list[int]:
    """Where each event's characters end: where the next event that starts later starts (an empty element,
    ``<break/>``, starts and ends at one character)."""
    ends: list[int] = []
    following = later = length  # where the nearest later event that starts after this one starts; the next
    for event in reversed(events):
        if later > event.at:
            following = later
        ends.append(following)
        later = event.at
    return ends[::-1]


def _byte_offsets(text: str) -> list[int]:
    """The UTF-8 offset of each character of ``text`` (and of its end)."""
    offsets = [0]
    for ch in text:
        offsets.append(offsets[-1] + len(ch.encode("utf-8")))
    return offsets


def _error(message: str, at: int) -> ConfigError:
    return ConfigError(f"{message} (at character {at})", code=INVALID_MARKUP)
