"""English words behind the normalizer's rules: abbreviations, units, months, days, names.

Only what misaki reads wrong is listed (docs/text.md, "What is read how"): it already reads "Dr.", "Mr.",
"etc.", "vs.", "GHz" and most acronyms ("NASA" as a word, "FBI" as letters) right.
"""

from __future__ import annotations

#: Abbreviations that stand for a phrase, as written → what is said.  misaki spells most of them as
#: letters ("e.g." is "E G", "TBD" is "T B D") or reads them as a word ("ASAP" is "a-sap").
PHRASES = {
    "e.g.": "for example",
    "i.e.": "that is",
    "a.k.a.": "also known as",
    "aka": "also known as",
    "approx.": "approximately",
    "w/o": "without",
    "w/": "with",
    "incl.": "including",
    "dept.": "department",
    "fig.": "figure",
    "min.": "minimum",
    "max.": "maximum",
    "pop.": "population",
    "ext.": "extension",
    "ASAP": "as soon as possible",
    "TBD": "to be determined",
    "TBA": "to be announced",
    "BTW": "by the way",
    "btw": "by the way",
    "IMO": "in my opinion",
    "IMHO": "in my humble opinion",
    "imo": "in my opinion",
    "YoY": "year over year",
    "MoM": "month over month",
    "QoQ": "quarter over quarter",
    "Ave.": "Avenue",
    "Blvd.": "Boulevard",
    "Rd.": "Road",
    "Mt.": "Mount",
}
#: Each lower-case entry also opens a sentence: "E.g." → "For example".
PHRASES |= {k[0].upper() + k[1:]: v[0].upper() + v[1:] for k, v in PHRASES.items() if k[0].islower()}

#: Acronyms said as a word that misaki spells letter by letter, and one it runs together: misaki's "ETA"
#: is heard as "ATA" (the reading corpus), its letters apart as "ETA".
ACRONYM_WORDS = {"JSON": "Jason", "JPEG": "jay peg", "ETA": "E T A"}

#: Unit symbols after a number → (singular, plural).  Case matters: "MB" is megabytes, "mb" is not a unit.
UNITS = {
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "kph": ("kilometer per hour", "kilometers per hour"),
    "mph": ("mile per hour", "miles per hour"),
    "km": ("kilometer", "kilometers"),
    "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"),
    "kg": ("kilogram", "kilograms"),
    "mg": ("milligram", "milligrams"),
    "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"),
    "ft": ("foot", "feet"),
    "lbs": ("pound", "pounds"),
    "lb": ("pound", "pounds"),
    "oz": ("ounce", "ounces"),
    "tbsp": ("tablespoon", "tablespoons"),
    "tsp": ("teaspoon", "teaspoons"),
    "gal": ("gallon", "gallons"),
    "hrs": ("hour", "hours"),
    "hr": ("hour", "hours"),
    "mins": ("minute", "minutes"),
    "min": ("minute", "minutes"),
    "secs": ("second", "seconds"),
    "sec": ("second", "seconds"),
    "ms": ("millisecond", "milliseconds"),
    "TB": ("terabyte", "terabytes"),
    "GB": ("gigabyte", "gigabytes"),
    "MB": ("megabyte", "megabytes"),
    "KB": ("kilobyte", "kilobytes"),
    "kB": ("kilobyte", "kilobytes"),
    "GB/s": ("gigabyte per second", "gigabytes per second"),
    "MB/s": ("megabyte per second", "megabytes per second"),
    "Gbps": ("gigabit per second", "gigabits per second"),
    "Mbps": ("megabit per second", "megabits per second"),
    "kWh": ("kilowatt hour", "kilowatt hours"),
    "kW": ("kilowatt", "kilowatts"),
    "GHz": ("gigahertz", "gigahertz"),
    "MHz": ("megahertz", "megahertz"),
    "kHz": ("kilohertz", "kilohertz"),
    "Hz": ("hertz", "hertz"),
}
#: Time units after "/": "$19.99/month" is "per month".
PER = {"month": "month", "mo": "month", "year": "year", "yr": "year", "week": "week", "day": "day"}
PER |= {"hour": "hour", "hr": "hour", "night": "night", "person": "person", "user": "user", "seat": "seat"}

MONTHS = "January February March April May June July August September October November December".split()
#: Month abbreviations (with or without a period) before a day: "Jan. 15", "Nov 3".
MONTH_ABBREVIATIONS = {name[:3]: name for name in MONTHS if name != "May"} | {"Sept": "September"}
DAYS = {"Mon": "Monday", "Tue": "Tuesday", "Tues": "Tuesday", "Wed": "Wednesday", "Thu": "Thursday"}
DAYS |= {"Thur": "Thursday", "Thurs": "Thursday", "Fri": "Friday", "Sat": "Saturday", "Sun": "Sunday"}

#: Currency signs misaki does not read → the currency's name (it reads $, € and £ itself).
CURRENCIES = {"$": "dollars", "€": "euros", "£": "pounds", "¥": "yen", "₹": "rupees"}
#: Money scales as LLMs abbreviate them: "$2.5M", "$15k", "$3B", "$4.2 billion".
SCALES = {"k": "thousand", "K": "thousand", "M": "million", "B": "billion", "bn": "billion"}
SCALES |= {"thousand": "thousand", "million": "million", "billion": "billion", "trillion": "trillion"}

#: First names of monarchs and popes: after them a Roman numeral is an ordinal ("Elizabeth II" is
#: "Elizabeth the Second"); after any other word it is a number ("World War II" is "World War Two").
REGNAL_NAMES = frozenset(
    "Alexander Alfonso Benedict Catherine Charles Clement Constantine Edward Elizabeth Ferdinand Francis "
    "Frederick George Gregory Henry Innocent Ivan James John Leo Louis Mary Napoleon Nicholas Paul Peter "
    "Philip Pius Ramesses Richard Victor William".split()
)
ROMAN = {
    numeral: value
    for value, numeral in enumerate(
        "I II III IV V VI VII VIII IX X XI XII XIII XIV XV XVI XVII XVIII XIX XX".split(), start=1
    )
}

#: Pairs written with a slash for "or" → what is said.
SLASH_OR = {pair: pair.replace("/", " or ") for pair in "yes/no true/false on/off he/she his/her".split()}
SLASH_OR["and/or"] = "and or"
#: Key names before "+" in a shortcut ("Ctrl+C" is "control C").
KEYS = {"Ctrl": "control", "Cmd": "command", "Alt": "alt", "Shift": "shift", "Option": "option"}
