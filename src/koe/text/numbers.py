"""The normalizer's rules for numbers: the forms misaki misreads, rewritten so that it reads them right.

Dates, times and timestamps, phone numbers, money with a scale ("$2.5M"), units after a number, ranges,
Roman numerals after a name.  What misaki already reads right ("$5.99", "45%", "3rd", "1990s") is left
alone; the measurements are in docs/text.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from koe.text.lexicon import (
    CURRENCIES,
    DAYS,
    MONTH_ABBREVIATIONS,
    MONTHS,
    PER,
    REGNAL_NAMES,
    ROMAN,
    SCALES,
    UNITS,
)
from koe.text.say import Rule, Say, at_end, say, verbatim

_FRACTIONS = {"1/2": "one half", "1/3": "one third", "2/3": "two thirds", "1/4": "one quarter"}
_FRACTIONS["3/4"] = "three quarters"
_DEGREE_UNITS = {"C": " degrees Celsius", "F": " degrees Fahrenheit", "": " degrees"}
#: US toll-free prefixes, said as a number after the leading 1 ("1-800" is "one, eight hundred").
_TOLL_FREE = frozenset("800 888 877 866 855 844 833".split())
#: After "6:00": a range to another time follows, so "6", not "6 o'clock".
_RANGE_AHEAD = re.compile(r"[ \t]*(?:to|–|-)[ \t]*\d")
_DIGIT_RUN = re.compile(r"\d+")
#: A phone number's digits as a person reads them out: 0 is "oh" ("five five five, oh one eight seven").
_PHONE_DIGITS = dict(
    zip("0123456789", "oh one two three four five six seven eight nine".split(), strict=True)
)
#: A number as written: digits, thousands commas, decimals (bounded, so no input makes a match slow).
_NUMBER = r"\d[\d,]{0,20}(?:\.\d{1,6})?"


def alternatives(words: Iterable[str]) -> str:
    """A regex alternation of ``words``, longest first so that "km/h" wins over "km"."""
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


def ordinal(n: int) -> str:
    """ "1st", "22nd", "11th": misaki reads these right."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _date(month: int, day: int, year: str | None) -> str | None:
    if 1 <= month <= 12 and 1 <= day <= 31:
        said = f"{MONTHS[month - 1]} {ordinal(day)}"
        return f"{said}, {year}" if year else said
    return None


def _dated(m: re.Match[str], said: str | None) -> list[Say]:
    return [Say(said or m.group(), m.start(), m.end(), verbatim=said is None)]


def _iso_date(m: re.Match[str]) -> list[Say]:
    """misaki reads 2025-03-01 digit group by digit group; say "March 1st, 2025" instead."""
    return _dated(m, _date(int(m.group("iso_m")), int(m.group("iso_d")), m.group("iso_y")))


def _slash_date(m: re.Match[str]) -> list[Say]:
    """03/01/2025: month first (US) unless the first number cannot be a month."""
    first, second = int(m.group("sd_a")), int(m.group("sd_b"))
    month, day = (second, first) if first > 12 else (first, second)
    return _dated(m, _date(month, day, m.group("sd_y")))


def _month_day(m: re.Match[str]) -> list[Say]:
    """ "Jan. 15", "March 1, 2025": misaki says "jan fifteen", "March one"; say "January 15th"."""
    name = m.group("md_m")
    month = MONTHS.index(MONTH_ABBREVIATIONS.get(name, name)) + 1
    return _dated(m, _date(month, int(m.group("md_d")), None))


def _clock(hour: int, minute: int, bare_hour: bool) -> str | None:
    """How a time is said: "14 oh 5", "9 30", "9 o'clock" (or "9" before am/pm or a range)."""
    if hour > 24 or minute > 59:
        return None
    if minute == 0:
        return f"{hour}" if bare_hour else f"{hour} o'clock"
    return f"{hour} oh {minute}" if minute < 10 else f"{hour} {minute}"


def _time(m: re.Match[str]) -> list[Say]:
    """misaki says 14:05 as "fourteen : zero five"; say "14 oh 5", and 9:00 as "9 o'clock"."""
    ampm = m.group("t_ampm")
    bare = bool(ampm) or _RANGE_AHEAD.match(m.string, m.end()) is not None
    said = _clock(int(m.group("t_h")), int(m.group("t_m")), bare)
    if said is None:
        return [Say(m.group(), m.start(), m.end(), verbatim=True)]
    parts = [Say(said, m.start("t_h"), m.end("t_m"))]
    if ampm:
        parts.append(verbatim(m, "t_ampm"))
    return parts


def _timestamp(m: re.Match[str]) -> list[Say]:
    """2024-06-15T14:30:00Z: "June 15th, 2024, 14 30 UTC" (seconds are noise to a listener)."""
    date = _date(int(m.group("ts_mo")), int(m.group("ts_d")), m.group("ts_y"))
    clock = _clock(int(m.group("ts_h")), int(m.group("ts_mi")), bare_hour=False)
    if date is None or clock is None:
        return [Say(m.group(), m.start(), m.end(), verbatim=True)]
    zone = m.group("ts_z") or ""
    if zone == "Z":
        clock += " UTC"
    elif zone:
        clock += f" UTC {'plus' if zone[0] == '+' else 'minus'} {int(zone[1:3])}"
    return [Say(f"{date}, {clock}", m.start(), m.end())]


def _phone(m: re.Match[str]) -> list[Say]:
    """555-1234 comes out of misaki as one number glued to another; say it digit by digit, in groups.

    The digits are said as words, and 0 as "oh", the way people read a number out: said as digits, "5 5 5"
    is heard as "55" by an ASR, and "zero one eight seven" less reliably than "oh one eight seven"
    (docs/text.md).
    """
    groups = _DIGIT_RUN.findall(m.group())
    said = [
        group
        if i == 1 and groups[0] == "1" and group in _TOLL_FREE
        else " ".join(_PHONE_DIGITS[d] for d in group)
        for i, group in enumerate(groups)
    ]
    plus = "plus " if m.group().startswith("+") else ""
    return [Say(plus + ", ".join(said), m.start(), m.end())]


def _money_scale(m: re.Match[str]) -> list[Say]:
    """ "$2.5M" is "2 dollars and 5 cents M" to misaki, "$4.2 billion" loses its dollars: say
    "2.5 million dollars"."""
    words = f" {SCALES[m.group('ms_s')]} {CURRENCIES[m.group('ms_c')]}"
    return [verbatim(m, "ms_n"), Say(words, m.start("ms_s"), m.end())]


def _currency_after(m: re.Match[str]) -> list[Say]:
    """Currencies misaki does not name ("¥1,500" is just "one thousand five hundred"): number, then name."""
    return [Say(f"{m.group('cw_n')} {CURRENCIES[m.group('cw_c')]}", m.start(), m.end())]


def _per(m: re.Match[str]) -> list[Say]:
    return [Say(f" per {PER[m.group('per_u')]}", m.start(), m.end())]


def _unit(m: re.Match[str]) -> list[Say]:
    """ "5 km" is "5 K M" to misaki (and "128 GB" "G B"): say the unit's name, singular after 1."""
    singular, plural = UNITS[m.group("u")]
    return [verbatim(m, "u_n"), Say(" " + (singular if m.group("u_n") == "1" else plural), *m.span("u"))]


def _day_range(m: re.Match[str]) -> list[Say]:
    """ "Mon–Fri": "Monday to Friday" (misaki reads "mon", a pause, "fry")."""
    first, last = (DAYS.get(d, d) for d in (m.group("dr_a"), m.group("dr_b")))
    return [Say(f"{first} to {last}", m.start(), m.end())]


def _roman(m: re.Match[str]) -> list[Say]:
    """ "Elizabeth II" is "Elizabeth the 2nd", "World War II" is "World War 2" (misaki says "I I")."""
    name, numeral = m.group("rn_name"), m.group("rn")
    value = ROMAN[numeral]
    if name in REGNAL_NAMES:
        said = f" the {ordinal(value)}"
    elif len(numeral) > 1:
        said = f" {value}"
    else:
        return [Say(m.group(), m.start(), m.end(), verbatim=True)]  # "Plan B. I": a letter, a pronoun
    return [verbatim(m, "rn_name"), Say(said, m.start("rn"), m.end("rn"))]


def _street(m: re.Match[str]) -> list[Say]:
    """ "Oak St." is "Oak Street" (misaki says "Oak Saint", right only before a name: "St. Louis")."""
    return [verbatim(m, "st_name"), Say(" Street." if at_end(m) else " Street", m.start("st"), m.end())]


def _fraction(m: re.Match[str]) -> list[Say]:
    return [Say(_FRACTIONS[m.group()], m.start(), m.end())]


def _degrees(m: re.Match[str]) -> list[Say]:
    return [Say(_DEGREE_UNITS[m.group("deg_u") or ""], m.start(), m.end())]


_MONTH_NAMES = alternatives([*MONTHS, *MONTH_ABBREVIATIONS])
_DAY_NAMES = alternatives([*DAYS, *DAYS.values()])
_NUMERALS = alternatives(ROMAN)
_PHONE = (
    r"\+\d{1,3}(?:[ .-]\(?\d{1,4}\)?){2,5}(?![\w-])"  # +1 555 123 4567, +44 20 7946 0958
    r"|(?:\b1[ .-]?)?\(\d{3}\)[ .-]?\d{3}[ .-]\d{4}\b"  # (555) 123-4567, 1 (800) 555-0123
    r"|\b(?:1[-.])?\d{3}[-.]\d{3}[-.]\d{4}\b"  # 1-800-555-0199, 555.123.4567
    r"|\b\d{3}-\d{4}\b"  # 555-1234
    r"|\b0\d{2,4} \d{3,4} \d{3,4}\b"  # 020 7946 0321
)

#: ``(name, pattern, handler)`` in priority order; inner groups are prefixed with the rule's name.
NUMBER_RULES: tuple[Rule, ...] = (
    (
        "timestamp",
        r"\b(?P<ts_y>\d{4})-(?P<ts_mo>\d{2})-(?P<ts_d>\d{2})[T ](?P<ts_h>\d{2}):(?P<ts_mi>\d{2})"
        r"(?::\d{2}(?:\.\d{1,9})?)?(?P<ts_z>Z|[+-]\d{2}:?\d{2})?(?![\w:])",
        _timestamp,
    ),
    ("iso_date", r"\b(?P<iso_y>\d{4})-(?P<iso_m>\d{2})-(?P<iso_d>\d{2})\b", _iso_date),
    ("slash_date", r"\b(?P<sd_a>\d{1,2})/(?P<sd_b>\d{1,2})/(?P<sd_y>\d{4})\b", _slash_date),
    ("phone", _PHONE, _phone),
    (
        "time",
        r"\b(?P<t_h>\d{1,2}):(?P<t_m>\d{2})\b(?!:\d)(?P<t_ampm>\s?[apAP]\.?[mM]\b\.?)?",
        _time,
    ),
    (
        "money_scale",
        rf"(?P<ms_c>[$€£])(?P<ms_n>{_NUMBER})[ \t]?(?P<ms_s>{alternatives(SCALES)})\b",
        _money_scale,
    ),
    ("currency_after", rf"(?P<cw_c>[¥₹])(?P<cw_n>{_NUMBER})", _currency_after),
    ("per", rf"(?<=\d)/(?P<per_u>{alternatives(PER)})\b", _per),
    ("unit", rf"(?<![\w.,])(?P<u_n>{_NUMBER})[ \t]?(?P<u>{alternatives(UNITS)})(?![\w/])", _unit),
    (
        "month_day",
        rf"\b(?P<md_m>{_MONTH_NAMES})\.?[ \t]+(?P<md_d>\d{{1,2}})(?:st|nd|rd|th)?(?![\w:]|[.,]\d)",
        _month_day,
    ),
    ("day_range", rf"\b(?P<dr_a>{_DAY_NAMES})\.?[ \t]?[–-][ \t]?(?P<dr_b>{_DAY_NAMES})\b\.?", _day_range),
    ("roman", rf"\b(?P<rn_name>[A-Z][a-z]+)[ \t]+(?P<rn>{_NUMERALS})\b(?!['’.]\w)", _roman),
    ("street", r"\b(?P<st_name>[A-Z][a-z]+)[ \t]+(?P<st>St\.)", _street),
    ("fraction", r"(?<![\w/])(?:1/2|1/3|2/3|1/4|3/4)(?![\w/])", _fraction),
    (
        "range",
        r"(?:(?<=\d)|(?<=\d[ap]m)|(?<=\d%))[ \t]?[–-][ \t]?(?=[$€£]?\d)",
        say(" to "),
    ),
    ("minus", r"(?<![\w)\]])-(?=\d)", say("minus ")),
    ("times", r"(?<=\d)x\b|(?<=\d)[ \t]*\*[ \t]*(?=\d)", say(" times ")),
    ("degrees", r"[ \t]?°(?:[ \t]?(?P<deg_u>[CF])\b)?", _degrees),
    ("number_sign", r"#(?=\d)", say("number ")),
    ("about", r"~(?=[ \t]?\d)", say("about ")),
)
