"""Hindi, Japanese and Mandarin: what their G2P misreads, rewritten as a speaker of the language says it.

Measured against each G2P (docs/text.md): OpenJTalk reads Japanese numbers with counters, 円, %, and
written dates itself, but "3:45" as "three, forty-five", "¥500" as "yen five hundred", "$5" without the
dollar and a 2025-03-01 digit by digit; cn2an (Mandarin) reads "3-5" as "3 minus 5", "1,234" as "1,
234" and 2025-03-01 as "2025 minus 3 minus 1"; espeak-ng drops "₹" and reads "14:30" as "fourteen colon
thirty" in Hindi. Numbers with a decimal point or thousands commas are written out for Hindi because
the espeak G2P must not see punctuation inside a word.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from koe.text.digits import MAX_NUMBER_DIGITS, SPACED, DigitReading
from koe.text.languages.markup import web_rules, with_markup
from koe.text.normalize import Rules
from koe.text.say import Handler, Say, say

_COLON = "[:：]"
_HINDI_MONTHS = "जनवरी फ़रवरी मार्च अप्रैल मई जून जुलाई अगस्त सितंबर अक्टूबर नवंबर दिसंबर".split()


def _guarded(limit_hour: int, said: Callable[[int, int], str]) -> Handler:
    """A time handler: ``said(hour, minute)``, or the text as it is when it is no time of day."""

    def handler(m: re.Match[str]) -> list[Say]:
        hour, minute = int(m.group("t_h")), int(m.group("t_m"))
        if hour > limit_hour or minute > 59:
            return [Say(m.group(), m.start(), m.end(), verbatim=True)]
        return [Say(said(hour, minute), m.start(), m.end())]

    return handler


def _dated(day: str, month: str, year: str, said: Callable[[int, int, int], str]) -> Handler:
    def handler(m: re.Match[str]) -> list[Say]:
        d, mo, y = int(m.group(day)), int(m.group(month)), int(m.group(year))
        if not (1 <= mo <= 12 and 1 <= d <= 31):
            return [Say(m.group(), m.start(), m.end(), verbatim=True)]
        return [Say(said(d, mo, y), m.start(), m.end())]

    return handler


def _money(units: dict[str, str], said: Callable[[str, str | None, str], str]) -> Handler:
    """``said(whole, decimals, unit)`` for an amount with its currency before or after it."""

    def handler(m: re.Match[str]) -> list[Say]:
        symbol = m.group("mb_s") or m.group("ma_s")
        whole, _, decimals = (m.group("mb_n") or m.group("ma_n")).replace(",", "").partition(".")
        return [Say(said(whole, decimals or None, units[symbol]), m.start(), m.end())]

    return handler


def _money_rule(
    units: dict[str, str], said: Callable[[str, str | None, str], str]
) -> tuple[str, str, Handler]:
    symbols = "|".join(re.escape(symbol) for symbol in sorted(units, key=len, reverse=True))
    amount = r"\d{1,3}(?:,\d{2,3})+(?:\.\d+)?|\d+(?:\.\d+)?"
    # an amount before its symbol starts where its number starts: tried at every digit of a long run, the
    # alternation would read the rest of the run each time (quadratic: 4,400 digits took a second)
    before = rf"(?P<mb_s>{symbols})[ \t]?(?P<mb_n>{amount})"
    pattern = rf"{before}|(?P<ma_n>(?<!\d)(?:{amount}))[ \t]?(?P<ma_s>{symbols})"
    return "money", pattern, _money(units, said)


#: Numbers are delimited by what is not a digit: CJK characters are word characters, so "\b" fails there.
_ISO = r"(?<![\d-])(?P<iso_y>\d{4})-(?P<iso_m>\d{1,2})-(?P<iso_d>\d{1,2})(?![\d-])"
_YMD = r"(?<![\d/])(?P<ymd_y>\d{4})/(?P<ymd_m>\d{1,2})/(?P<ymd_d>\d{1,2})(?![\d/])"
_DMY = r"(?<![\d/])(?P<sd_d>\d{1,2})/(?P<sd_m>\d{1,2})/(?P<sd_y>\d{4})(?![\d/])"
_TIME = rf"(?<!\d)(?P<t_h>\d{{1,2}}){_COLON}(?P<t_m>\d{{2}})(?!\d|{_COLON}\d)"
_RANGE = r"(?<=\d)[ \t]?[–~〜～-][ \t]?(?=\d)"
_MINUS = r"(?<![\dA-Za-z)\]])-(?=\d)"


def _erase(m: re.Match[str]) -> list[Say]:
    return []


#: Markdown emphasis glued to CJK text ("**太字**です"): English's rule wants a non-word after it.
_CJK_EMPHASIS: tuple[str, str, Handler] = ("cjk_emphasis", r"\*{1,3}|~~|__", _erase)
_DEGREES = r"[ \t]?(?:°[ \t]?[CF]?|℃)"


def _cjk_date(d: int, m: int, y: int) -> str:
    return f"{y}年{m}月{d}日"


def _ungrouped(m: re.Match[str]) -> list[Say]:
    """1,234 (Indian 1,00,000 too) → 1234: the G2P reads the number, and must see no comma inside it."""
    return [Say(m.group().replace(",", ""), m.start(), m.end())]


def _unit_last(whole: str, decimals: str | None, unit: str) -> str:
    """The amount, then the unit (5ドル, 12.50元): Japanese and Mandarin say the currency last."""
    return f"{whole}{'.' + decimals if decimals else ''}{unit}"


JAPANESE: Rules = with_markup(
    _CJK_EMPHASIS,
    *web_rules("ドット", "アット"),
    ("iso_date", _ISO, _dated("iso_d", "iso_m", "iso_y", _cjk_date)),
    ("ymd_date", _YMD, _dated("ymd_d", "ymd_m", "ymd_y", _cjk_date)),
    ("time", _TIME, _guarded(24, lambda h, m: f"{h}時" if m == 0 else f"{h}時{m}分")),
    _money_rule(
        {"$": "ドル", "US$": "ドル", "€": "ユーロ", "£": "ポンド", "¥": "円", "￥": "円"}, _unit_last
    ),
    ("range", _RANGE, say("から")),
    ("minus", _MINUS, say("マイナス")),
    ("degrees", _DEGREES, say("度")),
    ("number_sign", r"#(?P<ns_n>\d+)", lambda m: [Say(f"{m.group('ns_n')}番", m.start(), m.end())]),
    (
        "fraction",
        r"(?<![\d/])(?P<fr_a>\d{1,3})/(?P<fr_b>\d{1,3})(?![\d/])",
        lambda m: [Say(f"{m.group('fr_b')}分の{m.group('fr_a')}", m.start(), m.end())],
    ),
)


MANDARIN: Rules = with_markup(
    _CJK_EMPHASIS,
    *web_rules("点", "艾特"),
    ("iso_date", _ISO, _dated("iso_d", "iso_m", "iso_y", _cjk_date)),
    ("ymd_date", _YMD, _dated("ymd_d", "ymd_m", "ymd_y", _cjk_date)),
    ("time", _TIME, _guarded(24, lambda h, m: f"{h}点" if m == 0 else f"{h}点{m}分")),
    _money_rule({"$": "美元", "US$": "美元", "€": "欧元", "£": "英镑", "¥": "元", "￥": "元"}, _unit_last),
    ("thousands", r"(?<![\d.])\d{1,3}(?:,\d{3})+(?!\d)", _ungrouped),
    ("range", _RANGE, say("到")),
    ("minus", _MINUS, say("负")),
    ("degrees", _DEGREES, say("度")),
    ("number_sign", r"#(?P<ns_n>\d+)", lambda m: [Say(f"{m.group('ns_n')}号", m.start(), m.end())]),
)  # fmt: skip


#: Kanji digits run together, which OpenJTalk reads as a number is read out, digit by digit (五五五 →
#: ごーごーごー, 〇 as ゼロ or まる); Arabic digits apart it reads as one number ("10 2" → 12).
JAPANESE_DIGITS = DigitReading(tuple("〇一二三四五六七八九"), "", "、", "点", MAX_NUMBER_DIGITS)
#: Chinese digits, read one by one by the Mandarin G2P itself (cn2an fails past 16 digits).
MANDARIN_DIGITS = DigitReading(tuple("零一二三四五六七八九"), "", "，", "点", MAX_NUMBER_DIGITS)
#: Digits apart, which espeak-ng reads in Hindi; the point is दशमलव, as the decimal rule says it.
HINDI_DIGITS = DigitReading(SPACED, " ", ", ", " दशमलव ", MAX_NUMBER_DIGITS)


def _hindi_money(whole: str, decimals: str | None, unit: str) -> str:
    if unit == "रुपये" and whole == "1":
        unit = "रुपया"
    if decimals and unit in ("रुपये", "रुपया") and int(decimals) and len(decimals) <= 2:
        return f"{whole} {unit} {int(decimals.ljust(2, '0'))} पैसे"
    return f"{whole} दशमलव {decimals} {unit}" if decimals else f"{whole} {unit}"


HINDI: Rules = with_markup(
    *web_rules("डॉट", "एट"),
    ("iso_date", _ISO, _dated("iso_d", "iso_m", "iso_y", lambda d, m, y: f"{d} {_HINDI_MONTHS[m - 1]} {y}")),
    ("slash_date", _DMY, _dated("sd_d", "sd_m", "sd_y", lambda d, m, y: f"{d} {_HINDI_MONTHS[m - 1]} {y}")),
    ("time", _TIME, _guarded(24, lambda h, m: f"{h} बजे" if m == 0 else f"{h} बजकर {m} मिनट")),
    _money_rule({"₹": "रुपये", "Rs.": "रुपये", "$": "डॉलर", "€": "यूरो", "£": "पाउंड"}, _hindi_money),
    ("thousands", r"(?<![\d.])\d{1,3}(?:,\d{2,3})+(?!\d)", _ungrouped),
    (
        "decimal",
        r"(?<![\d.])(?P<dc_w>\d+)\.(?P<dc_f>\d+)(?!\d|\.\d)",
        lambda m: [Say(f"{m.group('dc_w')} दशमलव {m.group('dc_f')}", m.start(), m.end())],
    ),
    ("range", _RANGE, say(" से ")),
    ("minus", _MINUS, say("माइनस ")),
    ("degrees", r"[ \t]?(?:°[ \t]?C|℃)", say(" डिग्री सेल्सियस")),
)  # fmt: skip
