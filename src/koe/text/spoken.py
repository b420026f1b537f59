"""The normalizer's rules: markdown to drop, symbols to say, and the number forms misaki misreads.

Each rule is ``(name, regex, handler)``; the handler turns a match into spoken parts, each carrying the
source span it stands for.  Rules are tried in this order at each position (one alternation).  The
measurements behind the number rules are in docs/text.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Say:
    """Spoken text for the source span ``[start, end)``; ``verbatim`` text is a copy of that span."""

    text: str
    start: int
    end: int
    verbatim: bool = False


Handler = Callable[[re.Match[str]], list[Say]]

_MONTHS = "January February March April May June July August September October November December".split()
_FRACTIONS = {"1/2": "one half", "1/3": "one third", "2/3": "two thirds", "1/4": "one quarter"}
_FRACTIONS["3/4"] = "three quarters"
_SYMBOLS = {
    "→": " to ",
    "->": " to ",
    "←": " from ",
    "×": " times ",
    "÷": " divided by ",
    "≈": " about ",
    "≠": " is not ",
    "≤": " at most ",
    "≥": " at least ",
    "±": " plus or minus ",
    "^": " to the power of ",
}
_UNITS = {"C": " degrees Celsius", "F": " degrees Fahrenheit", "": " degrees"}


def _drop(m: re.Match[str]) -> list[Say]:
    return [Say(" ", m.start(), m.end())]


def _erase(m: re.Match[str]) -> list[Say]:
    """Markup glued to a word (``**bold**``, backticks) vanishes without leaving a space."""
    return []


def _keep(group: str) -> Handler:
    """Say only the named group, verbatim (link text, image alt text, the digits of a list number)."""

    def handler(m: re.Match[str]) -> list[Say]:
        return [Say(m.group(group), m.start(group), m.end(group), verbatim=True)]

    return handler


def _say(words: str) -> Handler:
    def handler(m: re.Match[str]) -> list[Say]:
        return [Say(words, m.start(), m.end())]

    return handler


def _dotted(name: str) -> str:
    return " dot ".join(part for part in name.split(".") if part)


def _url(m: re.Match[str]) -> list[Say]:
    """A URL is said as its host ("docs dot python dot org"): the path is noise to a listener."""
    host = re.sub(r"^(?:https?://)?(?:www\.)?", "", m.group(), flags=re.I)
    host = re.split(r"[/:?#]", host, maxsplit=1)[0]
    return [Say(_dotted(host), m.start(), m.end())]


def _email(m: re.Match[str]) -> list[Say]:
    local, domain = m.group().split("@", 1)
    local = re.sub(r"[._+-]+", " ", local)
    return [Say(f"{local} at {_dotted(domain)}", m.start(), m.end())]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _date(month: int, day: int, year: str) -> str | None:
    if 1 <= month <= 12 and 1 <= day <= 31:
        return f"{_MONTHS[month - 1]} {_ordinal(day)}, {year}"
    return None


def _iso_date(m: re.Match[str]) -> list[Say]:
    """misaki reads 2025-03-01 digit group by digit group; say "March 1st, 2025" instead."""
    said = _date(int(m.group("iso_m")), int(m.group("iso_d")), m.group("iso_y"))
    return [Say(said or m.group(), m.start(), m.end(), verbatim=said is None)]


def _slash_date(m: re.Match[str]) -> list[Say]:
    """03/01/2025: month first (US) unless the first number cannot be a month."""
    first, second = int(m.group("sd_a")), int(m.group("sd_b"))
    month, day = (second, first) if first > 12 else (first, second)
    said = _date(month, day, m.group("sd_y"))
    return [Say(said or m.group(), m.start(), m.end(), verbatim=said is None)]


def _time(m: re.Match[str]) -> list[Say]:
    """misaki says 14:05 as "fourteen : zero five"; say "14 oh 5", and 9:00 as "9 o'clock"."""
    hour, minute = int(m.group("t_h")), int(m.group("t_m"))
    if hour > 24 or minute > 59:
        return [Say(m.group(), m.start(), m.end(), verbatim=True)]
    if minute == 0:
        said = f"{hour} o'clock" if not m.group("t_ampm") else f"{hour}"
    elif minute < 10:
        said = f"{hour} oh {minute}"
    else:
        said = f"{hour} {minute}"
    parts = [Say(said, m.start("t_h"), m.end("t_m"))]
    if m.group("t_ampm"):
        parts.append(Say(m.group("t_ampm"), m.start("t_ampm"), m.end("t_ampm"), verbatim=True))
    return parts


def _phone(m: re.Match[str]) -> list[Say]:
    """555-1234 comes out of misaki as one number glued to another; say it digit by digit."""
    groups = re.split(r"[-.]", m.group())
    return [Say(", ".join(" ".join(g) for g in groups), m.start(), m.end())]


def _fraction(m: re.Match[str]) -> list[Say]:
    return [Say(_FRACTIONS[m.group()], m.start(), m.end())]


def _symbol(m: re.Match[str]) -> list[Say]:
    return [Say(_SYMBOLS[m.group()], m.start(), m.end())]


def _degrees(m: re.Match[str]) -> list[Say]:
    return [Say(_UNITS[m.group("deg_u") or ""], m.start(), m.end())]


def _list_number(m: re.Match[str]) -> list[Say]:
    """ "2)" and "2." opening a line are said as "2." so the number gets its own short pause."""
    return [
        Say(m.group("ln_n"), m.start("ln_n"), m.end("ln_n"), verbatim=True),
        Say(". ", m.end("ln_n"), m.end()),
    ]


_URL_CHARS = r"[^\s<>()\[\]\"'`]"
#: A URL does not end in sentence punctuation: "see example.com." ends the sentence, not the URL.
_URL_END = r"[^\s<>()\[\]\"'`.,;:!?]"
_EMOJI = (
    "\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\U0001f1e6-\U0001f1ff\ufe0f\u200d\u20e3"
    "\U000e0020-\U000e007f"
)

#: ``(name, pattern, handler)`` in priority order; inner groups are prefixed with the rule's name.
RULES: tuple[tuple[str, str, Handler], ...] = (
    ("image", r"!\[(?P<img_alt>[^\]\n]*)\]\([^)\n]*\)", _keep("img_alt")),
    ("link", r"\[(?P<link_text>[^\]\n]+)\]\([^)\n]*\)", _keep("link_text")),
    ("url", rf"\b(?:https?://|www\.){_URL_CHARS}*{_URL_END}", _url),
    ("email", r"\b[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+\b", _email),
    ("tag", r"</?(?:br|p|div|span|b|i|em|strong|u|code|pre|sup|sub|small|hr)\b[^<>\n]*>", _drop),
    ("heading", r"^[ \t]*#{1,6}[ \t]+|[ \t]+#+[ \t]*$", _drop),
    ("quote", r"^[ \t]*>+[ \t]?", _drop),
    ("table_rule", r"^[ \t]*\|?(?:[ \t]*:?-{3,}:?[ \t]*\|)+(?:[ \t]*:?-{3,}:?[ \t]*)?$", _drop),
    ("rule", r"^[ \t]*(?:[-*_][ \t]*){3,}$", _drop),
    ("bullet", r"^[ \t]*[-*+•][ \t]+", _drop),
    ("list_number", r"^[ \t]*(?P<ln_n>\d{1,3})[.)][ \t]+", _list_number),
    ("cell_edge", r"^[ \t]*\|[ \t]*|[ \t]*\|[ \t]*$", _drop),
    ("cell", r"[ \t]*\|[ \t]*", _say(", ")),
    ("code_tick", r"`+", _erase),
    (
        "emphasis",
        r"(?<![\w*~])(?:\*{1,3}|_{1,3}|~~)(?=[^\s*_~])|(?<=[^\s*_~])(?:\*{1,3}|_{1,3}|~~)(?![\w*~])",
        _erase,
    ),
    ("iso_date", r"\b(?P<iso_y>\d{4})-(?P<iso_m>\d{2})-(?P<iso_d>\d{2})\b", _iso_date),
    ("slash_date", r"\b(?P<sd_a>\d{1,2})/(?P<sd_b>\d{1,2})/(?P<sd_y>\d{4})\b", _slash_date),
    ("phone", r"\b\d{3}[-.]\d{3}[-.]\d{4}\b|\b\d{3}-\d{4}\b", _phone),
    ("time", r"\b(?P<t_h>\d{1,2}):(?P<t_m>\d{2})\b(?!:\d)(?P<t_ampm>\s?[ap]\.?m\b\.?)?", _time),
    ("fraction", r"(?<![\w/])(?:1/2|1/3|2/3|1/4|3/4)(?![\w/])", _fraction),
    ("range", r"(?<=\d)[ \t]?[–-][ \t]?(?=\d)", _say(" to ")),
    ("minus", r"(?<![\w)\]])-(?=\d)", _say("minus ")),
    ("degrees", r"[ \t]?°(?:[ \t]?(?P<deg_u>[CF])\b)?", _degrees),
    ("number_sign", r"#(?=\d)", _say("number ")),
    ("about", r"~(?=[ \t]?\d)", _say("about ")),
    ("symbol", "|".join(re.escape(s) for s in _SYMBOLS), _symbol),
    ("snake", r"(?<=[^\W_])_(?=[^\W_])", _drop),
    ("emoji", f"[{_EMOJI}]+", _erase),
)
