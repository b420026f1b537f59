"""The normalizer's rules that hold in every language: pronunciation markup is kept as written for the
pipeline; markdown, HTML tags, table cells and emoji are dropped whatever the language; URLs and e-mail
addresses are said with the language's words.

The markup rules are English's own (:data:`koe.text.spoken.RULES`), picked by name, so a fix there holds
here too; the rules that say English words (numbers, times, symbols) are replaced per language.
"""

from __future__ import annotations

import re

from koe.text.normalize import Rules
from koe.text.say import Handler, Say
from koe.text.spoken import RULES
from koe.text.table import PLAIN_TABLE_RULES

#: English's rules that say no English word.
_MARKUP = (
    "pronunciation", "image", "link_open", "link_close", "link_definition", "footnote", "tag", "heading",
    "quote", "rule", "task", "bullet", "list_number",
)  # fmt: skip
#: After the table rules.
_MARKUP_AFTER = ("code_tick", "emphasis", "snake")
_EMOJI = "emoji"
_BY_NAME = {name: (name, pattern, handler) for name, pattern, handler in RULES}
_missing = [name for name in (*_MARKUP, *_MARKUP_AFTER, _EMOJI) if name not in _BY_NAME]
if _missing:  # the English rules were renamed: say which, rather than silently keep markdown
    raise ImportError(f"koe.text.spoken.RULES has no rules named {_missing}")

#: A URL ends at a space, a bracket or quote, or CJK text (written without a space after it).
_URL_CHARS = r"[^\s<>()\[\]\"'`\u3000-\u9fff\uff00-\uffef]"
_URL_END = r"[^\s<>()\[\]\"'`.,;:!?\u3000-\u9fff\uff00-\uffef]"
#: Delimited by what cannot be part of one, not by "\b": kana and kanji are word characters, so
#: "詳しくはhttps://…" has no word boundary before the URL.
URL = rf"(?<![A-Za-z0-9_.-])(?:https?://|www\.){_URL_CHARS}*{_URL_END}"
EMAIL = r"(?<![A-Za-z0-9_.+-])[A-Za-z0-9_.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+(?![A-Za-z0-9-])"


def with_markup(*rules: tuple[str, str, Handler]) -> Rules:
    """A language's rules: the markup rules first, then ``rules``, then emoji (dropped)."""
    markup = (
        *(_BY_NAME[name] for name in _MARKUP),
        *PLAIN_TABLE_RULES,
        *(_BY_NAME[n] for n in _MARKUP_AFTER),
    )
    return (*markup, *rules, _BY_NAME[_EMOJI])


def web_rules(dot: str, at: str) -> tuple[tuple[str, str, Handler], tuple[str, str, Handler]]:
    """The URL rule (its host, the dots said as ``dot``) and the e-mail rule (``at`` for "@")."""

    def dotted(name: str) -> str:
        return f" {dot} ".join(part for part in name.split(".") if part)

    def url(m: re.Match[str]) -> list[Say]:
        host = re.sub(r"^(?:https?://)?(?:www\.)?", "", m.group(), flags=re.I)
        host = re.split(r"[/:?#]", host, maxsplit=1)[0]
        return [Say(f" {dotted(host)} ", m.start(), m.end())]

    def email(m: re.Match[str]) -> list[Say]:
        local, domain = m.group().split("@", 1)
        local = re.sub(r"[._+-]+", " ", local)
        return [Say(f" {local} {at} {dotted(domain)} ", m.start(), m.end())]

    return ("url", URL, url), ("email", EMAIL, email)
