"""Reading ``KOE_*`` environment variables into a settings group (:mod:`koe.settings` declares them):
each variable's name, how its text becomes the field's value, errors that name the variable, and what each
field accepts in words, for those errors and for the generated reference.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Self, Union, get_args, get_origin

from pydantic import ConfigDict, ModelWrapValidatorHandler, ValidationError, model_validator
from pydantic.dataclasses import dataclass
from pydantic.fields import FieldInfo

from koe.errors import ConfigError

ENV_PREFIX = "KOE_"
#: An input shown back in an error is cut here: it names the value, a long one need not be repeated whole.
_SHOWN_CHARS = 60
#: Every group's: each float finite (an infinite timeout is no limit), and an unknown override is a typo.
CONFIG = ConfigDict(allow_inf_nan=False, extra="forbid")
#: A range constraint's words.
_SYMBOLS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}


def variable(name: str) -> str:
    """The environment variable of the field ``name``."""
    return ENV_PREFIX + name.upper()


def fields_of(group: type[Any]) -> dict[str, FieldInfo]:
    """The fields of a settings group, in declaration order."""
    found: dict[str, FieldInfo] = getattr(group, "__pydantic_fields__")  # noqa: B009 (pydantic sets it; mypy cannot see it)
    return found


def accepted(info: FieldInfo) -> str:
    """What a field accepts, in words (its type and range): for error messages and the reference table."""
    kinds, metadata = _unwrap(info.annotation)
    kind = next(k for k in kinds if k is not type(None))
    if get_origin(kind) is Literal:
        text = "one of " + ", ".join(str(choice) for choice in get_args(kind))
    elif get_origin(kind) is tuple:
        text = "comma-separated list"
    else:
        text = {int: "int", float: "float", bool: "bool", str: "str", Path: "path"}[kind]
    text += _bounds([*info.metadata, *metadata])
    return text + (" or empty" if type(None) in kinds else "")


@dataclass(frozen=True, config=CONFIG)
class Group:
    """What every settings group shares: reading ``KOE_*`` variables, and errors that name them."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Self:
        """Build the group from ``KOE_*`` variables (default: this process's), then ``overrides`` (``None``
        values are ignored).

        Raises:
            ConfigError: a variable or override has the wrong type or is out of range, or an override is
                no field of the group; the message names the variable.
        """
        environ = os.environ if environ is None else environ
        fields = fields_of(cls)
        unknown = set(overrides) - set(fields)
        if unknown:
            raise ConfigError(f"unknown settings: {sorted(unknown)}", code="invalid_field")
        values = {
            name: _read(info, environ[variable(name)])
            for name, info in fields.items()
            if variable(name) in environ
        }
        values.update(
            {name: _choice(fields[name], value) for name, value in overrides.items() if value is not None}
        )
        return cls(**values)

    @model_validator(mode="wrap")
    @classmethod
    def _named(cls, values: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        """Every construction (``from_env``, ``Settings(**values)``, ``dataclasses.replace``) fails with a
        ``ConfigError`` naming the variable, as a start-up error should; a ``ConfigError`` of
        ``__post_init__`` passes through as it is."""
        try:
            return handler(values)
        except ValidationError as exc:
            raise _config_error(cls, exc) from exc


def require(name: str, ok: bool, expected: str) -> None:
    """A check ``__post_init__`` makes: ``ConfigError`` naming the variable unless ``ok``."""
    if not ok:
        raise ConfigError(f"{variable(name)}: expected {expected} (setting {name})", code="invalid_field")


def _unwrap(annotation: Any) -> tuple[list[Any], list[Any]]:
    """``annotation``'s kinds (one, or a type and ``NoneType``) and an ``Annotated`` kind's constraints."""
    union = get_origin(annotation) in (Union, UnionType)
    kinds: list[Any] = []
    metadata: list[Any] = []
    for kind in get_args(annotation) if union else (annotation,):
        if get_origin(kind) is Annotated:
            kind, *extra = get_args(kind)
            metadata += [m for e in extra for m in (e.metadata if isinstance(e, FieldInfo) else [e])]
        kinds.append(kind)
    return kinds, metadata


def _bounds(metadata: list[Any]) -> str:
    """The range pydantic's ``ge``/``gt``/``le``/``lt`` constraints allow: `` >= 1``, `` in (0, 0.1]``…"""
    found = {key: getattr(m, key) for m in metadata for key in _SYMBOLS if getattr(m, key, None) is not None}
    lower = next(((key, v) for key, v in found.items() if key in ("ge", "gt")), None)
    upper = next(((key, v) for key, v in found.items() if key in ("le", "lt")), None)
    if lower is not None and upper is not None:
        opening, closing = "[" if lower[0] == "ge" else "(", "]" if upper[0] == "le" else ")"
        return f" in {opening}{lower[1]}, {upper[1]}{closing}"
    return "".join(f" {_SYMBOLS[key]} {value}" for key, value in found.items())


def _read(info: FieldInfo, raw: str) -> Any:
    """One variable's text as the field takes it: empty is none for an optional field, a list is
    comma-separated, a choice is read in any case; the rest pydantic converts (``"9000"`` → 9000)."""
    kinds, _ = _unwrap(info.annotation)
    if type(None) in kinds and not raw.strip():
        return None
    if any(get_origin(kind) is tuple for kind in kinds):
        return tuple(item.strip() for item in raw.split(",") if item.strip())
    return _choice(info, raw)


def _choice(info: FieldInfo, value: Any) -> Any:
    """``value`` spelled as the field's choice that it names in another case (``INFO`` for ``info``)."""
    kinds, _ = _unwrap(info.annotation)
    choices = [str(c) for kind in kinds if get_origin(kind) is Literal for c in get_args(kind)]
    if not isinstance(value, str) or not choices:
        return value
    return {choice.lower(): choice for choice in choices}.get(value.strip().lower(), value)


def _config_error(group: type[Any], exc: ValidationError) -> ConfigError:
    """``exc`` said the way a start-up error is: each wrong variable, what it takes and what it got (unless
    the field is secret)."""
    fields = fields_of(group)
    problems = []
    for error in exc.errors(include_url=False):
        name = str(error["loc"][0]) if error["loc"] else ""
        info = fields.get(name)
        if info is None:
            problems.append(f"unknown setting {name!r}")
            continue
        got = repr(error["input"])
        got = got if len(got) <= _SHOWN_CHARS else got[:_SHOWN_CHARS] + "…"
        shown = f", got {got}" if info.repr else ""  # a secret is never repeated
        problems.append(f"{variable(name)}: expected {accepted(info)}{shown} (setting {name})")
    return ConfigError("; ".join(problems), code="invalid_field")
