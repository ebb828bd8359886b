"""A few metadata fields of a GGUF file, read without parsing the rest.

transformers reads a GGUF's metadata through `gguf.GGUFReader`, which parses every vocabulary entry
as a NumPy view (about 25 s for a 262k-token vocabulary); the fields a served model needs (its
trained context, its end-of-sequence token) sit before the tokenizer arrays and take milliseconds.
"""
from __future__ import annotations

import mmap
import struct
from pathlib import Path

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
            11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def read_gguf_fields(path: str | Path, wanted: set[str]) -> dict:
    """The metadata values of `wanted` keys found in the GGUF file `path` (scalars and strings;
    arrays are skipped). Raises ValueError for a file that is not GGUF."""
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data[:4] != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        version, = struct.unpack_from("<I", data, 4)
        if version < 2:
            raise ValueError(f"{path}: GGUF version {version} is too old")
        count, = struct.unpack_from("<Q", data, 16)
        found, at = {}, 24
        for _ in range(count):
            key, at = _string(data, at)
            kind, = struct.unpack_from("<I", data, at)
            value, at = _value(data, at + 4, kind)
            if key in wanted:
                found[key] = value
                if len(found) == len(wanted):
                    break
        return found


def _string(data, at: int) -> tuple[str, int]:
    length, = struct.unpack_from("<Q", data, at)
    return bytes(data[at + 8:at + 8 + length]).decode("utf-8", "replace"), at + 8 + length


def _value(data, at: int, kind: int):
    if kind == _STRING:
        return _string(data, at)
    if kind == _ARRAY:
        inner, count = struct.unpack_from("<IQ", data, at)
        at += 12
        if inner == _STRING:
            for _ in range(count):
                at += 8 + struct.unpack_from("<Q", data, at)[0]
        elif inner in _SCALARS:
            at += count * struct.calcsize(_SCALARS[inner])
        else:
            for _ in range(count):
                at = _value(data, at, inner)[1]
        return None, at
    if kind not in _SCALARS:
        raise ValueError(f"unknown GGUF value type {kind}")
    fmt = _SCALARS[kind]
    return struct.unpack_from(fmt, data, at)[0], at + struct.calcsize(fmt)
