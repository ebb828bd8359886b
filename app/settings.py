"""Turning TOML tables into the components' frozen config dataclasses, with clear errors.

`build(cls, table, "section")` checks every key against the dataclass's fields (an unknown key is
named with its section and the known keys listed), converts values to the field's type (nested
dataclasses from sub-tables, paths from strings, tuples from lists), and lets the dataclass's own
validation speak for bad values, prefixed with the section.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path

from foresay.engine.errors import ForesayError


class ConfigError(ForesayError):
    """A configuration file or override that cannot be used; the message names the key."""


def _convert(value, hint, key: str):
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None and len(options) < len(typing.get_args(hint)):
            return None
        errors = []
        for option in options:
            try:
                return _convert(value, option, key)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"{key}: bad value {value!r}")
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a table, got {value!r}")
        return build(hint, value, key)
    if hint is typing.Any or hint is object:
        return value
    if origin in (tuple, list, frozenset, set):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        items = [_convert(v, args[0], key) for v in value] if args else list(value)
        return origin(items)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected a whole number, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    if hint is Path:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a path, got {value!r}")
        return Path(value).expanduser()
    if isinstance(hint, type) and issubclass(hint, (str, int)) and hint not in (str, int):  # enums
        try:
            return hint(value)
        except ValueError:
            raise ConfigError(f"{key}: {value!r} is not one of "
                              f"{', '.join(str(m.value) for m in hint)}") from None
    return value


def build(cls, table: dict, section: str):
    """An instance of dataclass `cls` from a TOML table (missing keys keep their defaults)."""
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(table) - fields)
    where = f"[{section}]" if section else "the top level"
    if unknown:
        name = f"{section}.{unknown[0]}" if section else unknown[0]
        raise ConfigError(f"unknown key '{name}' (known keys of {where}: {', '.join(sorted(fields))})")
    values = {k: _convert(v, hints[k], f"{section}.{k}" if section else k) for k, v in table.items()}
    try:
        return cls(**values)
    except ConfigError:
        raise
    except (ForesayError, TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


def merge(base: dict, override: dict) -> dict:
    """Tables merged key by key (override wins); nested tables merged recursively."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def parse_override(text: str) -> dict:
    """`section.key=value` (value in TOML syntax, or a bare string) as a nested table."""
    import tomllib

    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {text!r}: write section.key=value")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    table: dict = value
    for part in reversed(key.strip().split(".")):
        table = {part: table}
    return table
