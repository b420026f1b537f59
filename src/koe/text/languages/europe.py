"""How Spanish, French, Italian and Brazilian Portuguese say times, dates, money and units; their
abbreviations (:mod:`koe.text.languages.romance` has the rules that use them)."""

from __future__ import annotations

from koe.text.digits import MAX_NUMBER_DIGITS, SPACED, DigitReading
from koe.text.languages.base import Abbreviations, TextRules
from koe.text.languages.romance import Words, rules

_SPACES = "\u00a0\u202f "

_SPANISH_MONTHS = (
    "enero", "febrero", "marzo", "abril", "mayo", "junio",
    "julio", "agosto", "septiembre", "octubre", "noviembre", "diciembre",
)  # fmt: skip
_FRENCH_MONTHS = (
    "janvier", "février", "mars", "avril", "mai", "juin",
    "juillet", "août", "septembre", "octobre", "novembre", "décembre",
)  # fmt: skip
_ITALIAN_MONTHS = (
    "gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno",
    "luglio", "agosto", "settembre", "ottobre", "novembre", "dicembre",
)  # fmt: skip
_PORTUGUESE_MONTHS = (
    "janeiro", "fevereiro", "março", "abril", "maio", "junho",
    "julho", "agosto", "setembro", "outubro", "novembro", "dezembro",
)  # fmt: skip


def _spanish_time(hour: int, minute: int) -> str:
    return f"{hour} en punto" if minute == 0 else f"{hour} y {minute}"


def _french_time(hour: int, minute: int) -> str:
    hours = "heure" if hour in (0, 1) else "heures"
    return f"{hour} {hours}" if minute == 0 else f"{hour} {hours} {minute}"


def _italian_time(hour: int, minute: int) -> str:
    return f"{hour} in punto" if minute == 0 else f"{hour} e {minute}"


def _portuguese_time(hour: int, minute: int) -> str:
    hours = "hora" if hour == 1 else "horas"
    return f"{hour} {hours}" if minute == 0 else f"{hour} e {minute}"


SPANISH = Words(
    lang="es",
    thousands=".",
    months=_SPANISH_MONTHS,
    dot="punto", at="arroba", decimal="coma", minus="menos", degrees="grados", celsius="centígrados",
    fahrenheit="Fahrenheit", to="a", number="número",
    money={"€": ("euro", "euros"), "$": ("dólar", "dólares"), "US$": ("dólar", "dólares"),
           "£": ("libra", "libras"), "R$": ("real", "reales")},
    cents=lambda whole, cents, unit: f"{whole} {unit} con {cents}",
    time=_spanish_time,
    date=lambda day, month, year: f"{day} de {_SPANISH_MONTHS[month - 1]} de {year}",
)  # fmt: skip
FRENCH = Words(
    lang="fr",
    thousands="." + _SPACES,
    months=_FRENCH_MONTHS,
    dot="point", at="arobase", decimal="virgule", minus="moins", degrees="degrés", celsius="Celsius",
    fahrenheit="Fahrenheit", to="à", number="numéro",
    money={"€": ("euro", "euros"), "$": ("dollar", "dollars"), "US$": ("dollar", "dollars"),
           "£": ("livre", "livres"), "R$": ("réal", "réaux")},
    cents=lambda whole, cents, unit: f"{whole} {unit} {cents}",
    time=_french_time,
    date=lambda day, month, year: f"{'1er' if day == 1 else day} {_FRENCH_MONTHS[month - 1]} {year}",
)  # fmt: skip
ITALIAN = Words(
    lang="it",
    thousands=".",
    months=_ITALIAN_MONTHS,
    dot="punto", at="chiocciola", decimal="virgola", minus="meno", degrees="gradi", celsius="centigradi",
    fahrenheit="Fahrenheit", to="a", number="numero",
    money={"€": ("euro", "euro"), "$": ("dollaro", "dollari"), "US$": ("dollaro", "dollari"),
           "£": ("sterlina", "sterline"), "R$": ("real", "real")},
    cents=lambda whole, cents, unit: f"{whole} {unit} e {cents}",
    time=_italian_time,
    date=lambda day, month, year: f"{'1º' if day == 1 else day} {_ITALIAN_MONTHS[month - 1]} {year}",
)  # fmt: skip
PORTUGUESE = Words(
    lang="pt-br",
    thousands=".",
    months=_PORTUGUESE_MONTHS,
    dot="ponto", at="arroba", decimal="vírgula", minus="menos", degrees="graus", celsius="Celsius",
    fahrenheit="Fahrenheit", to="a", number="número",
    money={"€": ("euro", "euros"), "$": ("dólar", "dólares"), "US$": ("dólar", "dólares"),
           "£": ("libra", "libras"), "R$": ("real", "reais")},
    cents=lambda whole, cents, unit: f"{whole} {unit} e {cents} centavos",
    time=_portuguese_time,
    date=lambda day, month, year: f"{'1º' if day == 1 else day} de {_PORTUGUESE_MONTHS[month - 1]} de {year}",
)  # fmt: skip

_ABBREVIATIONS = {
    "es": Abbreviations(frozenset("sr sra srta dr dra ud uds lic ing prof av pág núm vs".split()),
                        frozenset("etc".split())),
    "fr": Abbreviations(frozenset("m mme mlle mm dr pr me st ste vs cf".split()), frozenset("etc".split())),
    "it": Abbreviations(frozenset("sig sigra dott dr prof ing avv vs".split()), frozenset("ecc etc".split())),
    "pt-br": Abbreviations(frozenset("sr sra srta dr dra prof av vs".split()), frozenset("etc".split())),
}  # fmt: skip

EUROPEAN = {
    words.lang: TextRules(
        words.lang,
        rules=rules(words),
        abbreviations=_ABBREVIATIONS[words.lang],
        inverted_marks=words.lang == "es",
        digits=DigitReading(SPACED, " ", ", ", f" {words.decimal} ", MAX_NUMBER_DIGITS),
    )
    for words in (SPANISH, FRENCH, ITALIAN, PORTUGUESE)
}
