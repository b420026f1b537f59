"""The normalizer's rules: markdown to drop, addresses and symbols to say, then numbers and words.

Each rule is ``(name, regex, handler)``; the handler turns a match into spoken parts, each carrying the
source span it stands for (:mod:`koe.text.say`).  Rules are tried in this order at each position (one
alternation): markup first, then :data:`~koe.text.numbers.NUMBER_RULES`, then
:data:`~koe.text.words.WORD_RULES`, then symbols.  Every pattern's repetitions are bounded or
unambiguous, so no input makes the pass slower than linear.  docs/text.md says what is read how.
"""

from __future__ import annotations

import re

from koe.text.markup import MARKUP_RULE
from koe.text.numbers import NUMBER_RULES, alternatives
from koe.text.say import Rule, Say, drop, erase, keep
from koe.text.table import TABLE_RULES
from koe.text.words import WORD_RULES

__all__ = ["LINK_TARGET", "RULES", "Say"]

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
#: Top-level domains a bare address ends in ("docs.google.com", "acme.io/pricing").
_TLDS = "com org net io dev ai app edu gov co uk us de fr info me tv ly gg".split()
_WWW = re.compile(r"^(?:https?://)?(?:www\.)?", re.I)
_HOST_END = re.compile(r"[/:?#]")
_LOCAL_SEPARATORS = {".": " dot ", "_": " underscore ", "-": " dash ", "+": " plus "}
_LOCAL_SEPARATOR = re.compile(r"[._+-]")


def _dotted(name: str) -> str:
    return " dot ".join(part for part in name.split(".") if part)


def _host(url: str) -> str:
    """A URL is said as its host ("docs dot python dot org"): the path is noise to a listener."""
    return _dotted(_HOST_END.split(_WWW.sub("", url), maxsplit=1)[0])


def _address(address: str) -> str:
    """An e-mail address as a listener must hear it to write it down: "john dot smith at gmail dot com"."""
    local, domain = address.split("@", 1)
    local = _LOCAL_SEPARATOR.sub(lambda m: _LOCAL_SEPARATORS[m.group()], local)
    return f"{local} at {_dotted(domain)}"


def _url(m: re.Match[str]) -> list[Say]:
    return [Say(_host(m.group()), m.start(), m.end())]


def _email(m: re.Match[str]) -> list[Say]:
    return [Say(_address(m.group()), m.start(), m.end())]


def _autolink(m: re.Match[str]) -> list[Say]:
    """<https://example.com>, <mailto:bob@x.org>: the address is the point, the brackets go."""
    target = m.group("al").removeprefix("mailto:")
    return [Say(_address(target) if "@" in target else _host(target), m.start(), m.end())]


def _symbol(m: re.Match[str]) -> list[Say]:
    return [Say(_SYMBOLS[m.group()], m.start(), m.end())]


def _list_number(m: re.Match[str]) -> list[Say]:
    """ "2)" and "2." opening a line are said as "2." so the number gets its own short pause."""
    return [
        Say(m.group("ln_n"), m.start("ln_n"), m.end("ln_n"), verbatim=True),
        Say(". ", m.end("ln_n"), m.end()),
    ]


_URL_CHARS = r"[^\s<>()\[\]\"'`]"
#: A URL does not end in sentence punctuation: "see example.com." ends the sentence, not the URL.
_URL_END = r"[^\s<>()\[\]\"'`.,;:!?]"
_DOMAIN = rf"[A-Za-z0-9-]{{1,63}}(?:\.[A-Za-z0-9-]{{1,63}}){{0,6}}\.(?:{alternatives(_TLDS)})\b"
_PATH = rf"/(?:{_URL_CHARS}{{0,2000}}{_URL_END})?"
#: A link's target: no spaces, parentheses only balanced one deep (Wikipedia's "Python_(language)").
LINK_TARGET = r"(?:[^()\s]|\([^()\s]{0,300}\)){0,2000}"
_EMOJI = (
    "\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\U0001f1e6-\U0001f1ff\ufe0f\u200d\u20e3"
    "\U000e0020-\U000e007f"
)

#: Pronunciation markup, then markdown, HTML and addresses, in priority order; inner groups are prefixed
#: with the rule's name.
MARKUP_RULES: tuple[Rule, ...] = (
    MARKUP_RULE,  # pronunciation markup, kept as written for the pipeline (koe.text.markup)
    (
        "image",
        rf"!\[(?P<img_alt>[^\]\n]{{0,300}})\]\({LINK_TARGET}(?:[ \t]+\"[^\"\n]{{0,300}}\")?\)",
        keep("img_alt"),
    ),
    #: a link's text is read like any text (its emphasis and code markers go); its brackets and target go,
    #: so a link whose text and target arrive in different segments still reads as its text alone
    ("link_open", r"\[(?=[^\[\]\n]{1,300}(?:\][(\[]|\Z))", erase),
    ("link_close", rf"\]\({LINK_TARGET}(?:[ \t]+\"[^\"\n]{{0,300}}\")?\)|\]\[[^\[\]\n]{{0,100}}\]", erase),
    ("link_definition", r"^[ \t]{0,3}\[[^\]\n]{1,100}\]:[ \t]+\S[^\n]*$", drop),
    ("footnote", r"\[\^[^\]\s]{1,30}\]", erase),
    (
        "autolink",
        rf"<(?P<al>(?:https?://|www\.){_URL_CHARS}{{1,2000}}|mailto:[^<>\s]{{1,300}}"
        r"|[\w.+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8})>",
        _autolink,
    ),
    #: "(https://arxiv.org/abs/1234)", "(see docs.example.com)": a source cited in passing is decoration
    (
        "decoration",
        rf"[ \t]*\((?:(?i:see|source|sources|via|from)[ \t]*:?[ \t]*)?"
        rf"(?:(?:https?://|www\.)[^\s()<>]{{1,2000}}|{_DOMAIN}(?:{_PATH})?)[ \t]*\)",
        erase,
    ),
    ("url", rf"\b(?:https?://|www\.){_URL_CHARS}*{_URL_END}", _url),
    ("email", r"\b[\w.+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8}\b", _email),
    ("domain", rf"\b{_DOMAIN}(?:{_PATH})?", _url),
    ("tag", r"</?(?:br|p|div|span|b|i|em|strong|u|code|pre|sup|sub|small|hr)\b[^<>\n]*>", drop),
    ("heading", r"^[ \t]*#{1,6}[ \t]+|[ \t]+#+[ \t]*$", drop),
    ("quote", r"^[ \t]*>+[ \t]?", drop),
    ("rule", r"^[ \t]*(?:[-*_][ \t]*){3,}$|^[ \t]*={3,}[ \t]*$", drop),
    ("task", r"^[ \t]*[-*+•][ \t]+\[[ xX]\][ \t]+", drop),
    ("bullet", r"^[ \t]*[-*+•][ \t]+", drop),
    ("list_number", r"^[ \t]*(?P<ln_n>\d{1,3})[.)][ \t]+", _list_number),
    *TABLE_RULES,
    ("code_tick", r"`+", erase),
    (
        "emphasis",
        r"(?<![\w*~])(?:\*{1,3}|_{1,3}|~~)(?=[^\s*_~])|(?<=[^\s*_~])(?:\*{1,3}|_{1,3}|~~)(?![\w*~])",
        erase,
    ),
)
_LAST_RULES: tuple[Rule, ...] = (
    ("symbol", "|".join(re.escape(s) for s in _SYMBOLS), _symbol),
    ("snake", r"(?<=[^\W_])_(?=[^\W_])", drop),
    ("emoji", f"[{_EMOJI}]+", erase),
)

#: Every rule, in priority order.
RULES: tuple[Rule, ...] = (*MARKUP_RULES, *NUMBER_RULES, *WORD_RULES, *_LAST_RULES)
