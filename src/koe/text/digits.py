"""A number too long to be a quantity, read as a long code is read out: digit by digit, in groups.

Each language's G2P reads a number as a number up to some length, and past it misreads it or spends
superlinear time on it (OpenJTalk on a digit run, cn2an past 16 digits, misaki's num2words past its
scales; docs/text.md). So a number whose whole part or decimals hold more digits than the language's
:attr:`DigitReading.max_digits` is said one digit at a time, :data:`DIGIT_GROUP` digits a group with a
pause between groups: its G2P and its audio then cost what any text of that length costs. Pure: this
module finds and rewrites such numbers in a spoken text; :mod:`koe.text.normalize` applies it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Digits said together between two pauses, as card numbers and account numbers are grouped.
DIGIT_GROUP = 4
#: A number in a spoken text: a whole part (thousands commas allowed) and its decimals, if any.
_NUMBER = re.compile(r"(?P<whole>\d+(?:,\d{3}(?!\d))*)(?:\.(?P<fraction>\d+))?")


@dataclass(frozen=True, slots=True)
class DigitReading:
    """How long a number a language's G2P reads as a number, and how it is given a longer one to read it
    digit by digit.

    Attributes:
        digits: the ten digits, 0 to 9, written so that the G2P reads each alone.
        joiner: between the digits of a group.
        pause: between groups.
        point: the decimal point, said.
        max_digits: the most digits of a whole part, or of decimals, that the G2P reads as a number
            (the longest it reads right, in time linear in the text); past it, digit by digit.
    """

    digits: tuple[str, ...]
    joiner: str
    pause: str
    point: str
    max_digits: int

    def __post_init__(self) -> None:
        if len(self.digits) != 10:
            raise ValueError(f"expected the ten digits 0-9, got {len(self.digits)}: {self.digits}")
        if self.max_digits < 1:
            raise ValueError(f"expected max_digits >= 1, got {self.max_digits}")


#: Latin-script languages: digits apart, each read as a number alone ("5 5 5 5, 1 2").
SPACED = tuple("0123456789")
#: The most digits espeak-ng, OpenJTalk and cn2an all read as a number (hundreds of billions).
MAX_NUMBER_DIGITS = 12
#: English numbers are said in words up to the hundreds of trillions ("$1,000,000,000,000": one trillion
#: dollars). misaki (num2words) reads longer ones in words too, but past the trillions a listener follows
#: a run of digits better than a count of quadrillions.
ENGLISH_MAX_DIGITS = 15
ENGLISH_DIGITS = DigitReading(SPACED, " ", ", ", " point ", ENGLISH_MAX_DIGITS)


@dataclass(frozen=True, slots=True)
class Said:
    """What replaces the spoken characters ``[start, end)``: ``text``, or those characters as they are
    (``text`` None: a whole part short enough to be read as a number)."""

    start: int
    end: int
    text: str | None


def long_numbers(spoken: str, reading: DigitReading) -> list[Said]:
    """The parts of ``spoken`` that its numbers past ``reading.max_digits`` become, in order; the text
    between them is not listed. Linear in ``len(spoken)``."""
    said: list[Said] = []
    most = reading.max_digits
    for match in _NUMBER.finditer(spoken):
        whole, fraction = match.group("whole"), match.group("fraction")
        whole_digits = len(whole) - whole.count(",")
        if whole_digits <= most and (fraction is None or len(fraction) <= most):
            continue
        start, end = match.span("whole")
        if whole_digits <= most:
            said.append(Said(start, end, None))
        else:
            said += _grouped(spoken, start, end, reading)
        if fraction is not None:
            said.append(Said(end, end + 1, reading.point))
            said += _grouped(spoken, *match.span("fraction"), reading)
    return said


def _grouped(spoken: str, start: int, end: int, reading: DigitReading) -> list[Said]:
    """The digits of ``spoken[start:end]`` in groups, each followed by the pause but the last; a group
    stands for its characters up to the next group (a thousands comma between them goes with it)."""
    places = [i for i in range(start, end) if spoken[i] != ","]
    firsts = places[::DIGIT_GROUP]
    said: list[Said] = []
    for n, first in enumerate(firsts):
        group = places[n * DIGIT_GROUP : (n + 1) * DIGIT_GROUP]
        words = reading.joiner.join(reading.digits[int(spoken[i])] for i in group)
        last = n == len(firsts) - 1
        said.append(Said(first, end if last else firsts[n + 1], words if last else words + reading.pause))
    return said
