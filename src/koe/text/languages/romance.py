"""Spanish, French, Italian and Brazilian Portuguese: what espeak-ng misreads, rewritten in the language.

espeak-ng reads integers, percentages and ordinals in each of these languages (measured, docs/text.md),
so those are left to it. It reads "3:45" as "three colon forty-five", "12,50 €" as "twelve comma fifty
euro", "2025-03-01" digit group by digit group and "R$" as "real dollar", and the G2P must not see a
decimal comma or a thousands dot at all (phonemizer splits text at punctuation even inside a number).
These rules write times, dates, money and numbers the way a speaker of the language says them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from koe.text.languages.markup import web_rules, with_markup
from koe.text.normalize import Rules
from koe.text.say import Handler, Say, say

_CURRENCY_AFTER = r"[€$£]"
_ISO_DATE = r"\b(?P<iso_y>\d{4})-(?P<iso_m>\d{2})-(?P<iso_d>\d{2})\b"
#: Day first, as these languages write dates.
_SLASH_DATE = r"\b(?P<sd_d>\d{1,2})/(?P<sd_m>\d{1,2})/(?P<sd_y>\d{4})\b"
#: A decimal number not part of a dotted sequence (3.5, but not the 3.11 of 3.11.7).
_DECIMAL = r"(?<![\d.,])\d+[.,]\d+(?!\d|[.,]\d)"


@dataclass(frozen=True, slots=True)
class Words:
    """How one language says what the rules rewrite."""

    lang: str
    thousands: str  # the characters that group thousands (a regex character class's contents)
    months: tuple[str, ...]
    dot: str
    at: str
    decimal: str
    minus: str
    degrees: str
    celsius: str
    fahrenheit: str
    to: str
    number: str
    money: dict[str, tuple[str, str]]  # symbol → (one, many)
    cents: Callable[[str, int, str], str]  # (whole part said, cents, currency words) → said
    time: Callable[[int, int], str]
    date: Callable[[int, int, str], str]  # (day, month 1-12, year)


def _grouped(words: Words) -> str:
    """A number with its thousands grouped (exactly three digits a group)."""
    return rf"\d{{1,3}}(?:[{words.thousands}]\d{{3}})+"


def _amount(words: Words) -> str:
    """A number: grouped or not, then a decimal comma (or point) and its decimals."""
    return rf"(?:{_grouped(words)}|\d+)(?:[.,]\d+)?(?![\d])"


def _parts(words: Words, number: str) -> tuple[str, str | None]:
    """A number's whole part (digits only) and its decimals, if any."""
    match = re.fullmatch(rf"({_grouped(words)}|\d+)(?:[.,](\d+))?", number)
    if match is None:  # a point after the groups of an ungrouped number: "3.500" read as grouped
        return re.sub(r"\D", "", number), None
    return re.sub(r"\D", "", match.group(1)), match.group(2)


def _number(words: Words) -> Handler:
    """1.234 (or 1 234 in French) → 1234; 3,5 and 3.5 → "3 coma 5" (espeak would stop at the mark)."""

    def handler(m: re.Match[str]) -> list[Say]:
        whole, decimals = _parts(words, m.group())
        said = whole if decimals is None else f"{whole} {words.decimal} {decimals}"
        return [Say(said, m.start(), m.end())]

    return handler


def _money(words: Words) -> Handler:
    """An amount with its currency; one with more than two decimals is no sum in cents, and is said with
    all of them ("1,555 €" → "1 coma 555 euros")."""

    def handler(m: re.Match[str]) -> list[Say]:
        symbol = m.group("mb_s") or m.group("ma_s")
        whole, cents = _parts(words, m.group("mb_n") or m.group("ma_n"))
        one, many = words.money[symbol]
        unit = one if whole == "1" else many
        if cents is not None and len(cents) > 2:
            return [Say(f"{whole} {words.decimal} {cents} {many}", m.start(), m.end())]
        if cents is None or int(cents) == 0:
            return [Say(f"{whole} {unit}", m.start(), m.end())]
        return [Say(words.cents(whole, int(cents.ljust(2, "0")), unit), m.start(), m.end())]

    return handler


def _time(words: Words) -> Handler:
    def handler(m: re.Match[str]) -> list[Say]:
        hour, minute = int(m.group("t_h")), int(m.group("t_m"))
        if hour > 24 or minute > 59:
            return [Say(m.group(), m.start(), m.end(), verbatim=True)]
        return [Say(words.time(hour, minute), m.start(), m.end())]

    return handler


def _date(words: Words, day: str, month: str, year: str) -> Handler:
    def handler(m: re.Match[str]) -> list[Say]:
        d, mo = int(m.group(day)), int(m.group(month))
        if not (1 <= mo <= 12 and 1 <= d <= 31):
            return [Say(m.group(), m.start(), m.end(), verbatim=True)]
        return [Say(words.date(d, mo, m.group(year)), m.start(), m.end())]

    return handler


def _degrees(words: Words) -> Handler:
    def handler(m: re.Match[str]) -> list[Say]:
        unit = {"C": words.celsius, "F": words.fahrenheit}.get(m.group("deg_u") or "", "")
        return [Say(f" {words.degrees} {unit}", m.start(), m.end())]

    return handler


def rules(words: Words) -> Rules:
    """The normalizer's rules for one of these languages."""
    url, email = web_rules(words.dot, words.at)
    before = "|".join(re.escape(symbol) for symbol in sorted(words.money, key=len, reverse=True))
    amount = _amount(words)
    money = (
        rf"(?P<mb_s>{before})[ \t]?(?P<mb_n>{amount})"
        # where its number starts, not at every digit of a long run (quadratic: 4,400 digits took a second)
        rf"|(?P<ma_n>(?<!\d)(?:{amount}))[ \t\u00a0\u202f]?(?P<ma_s>{_CURRENCY_AFTER})"
    )
    return with_markup(
        url,
        email,
        ("iso_date", _ISO_DATE, _date(words, "iso_d", "iso_m", "iso_y")),
        ("slash_date", _SLASH_DATE, _date(words, "sd_d", "sd_m", "sd_y")),
        ("time", r"\b(?P<t_h>\d{1,2}):(?P<t_m>\d{2})\b(?!:\d)", _time(words)),
        ("money", money, _money(words)),
        ("ordinal_dot", r"(?<=\d)\.(?=[ºª])", say("")),
        ("number", rf"(?<![\d.,]){_grouped(words)}(?:,\d+)?(?!\d)|{_DECIMAL}", _number(words)),
        ("range", r"(?<=\d)[ \t]?[–-][ \t]?(?=\d)", say(f" {words.to} ")),
        ("minus", r"(?<![\w)\]])-(?=\d)", say(f"{words.minus} ")),
        ("degrees", r"[ \t]?°(?:[ \t]?(?P<deg_u>[CF])\b)?", _degrees(words)),
        ("number_sign", r"#(?=\d)", say(f"{words.number} ")),
    )  # fmt: skip
