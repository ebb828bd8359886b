"""The weights of a CTranslate2 model file (`model.bin`), read without CTranslate2.

CTranslate2 writes a model as one binary file: a format version, the spec's name and revision,
then each variable as its name, shape, data type and raw bytes, then aliases (a name that shares
another's bytes, such as a Whisper's output projection tied to its token embeddings). Only
variables stored in floating point are returned as arrays; a model quantized at conversion
(int8 variables with their scales) is refused with `UnreadableWeights`, and the caller decodes
through CTranslate2 itself.
"""
from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SUPPORTED_VERSIONS = (5, 6)
# CTranslate2's DataType enum, as written by its model spec
_FLOAT_TYPES = {0: np.float32, 4: np.float16}
_OTHER_TYPES = {1: "int8", 2: "int16", 3: "int32", 5: "bfloat16"}


class UnreadableWeights(ValueError):
    """A model file this reader does not take (another format version, or quantized weights)."""


@dataclass(frozen=True)
class Ct2Weights:
    spec: str  # "WhisperSpec", ...
    arrays: dict[str, np.ndarray]  # floating-point variables, aliases resolved
    scalars: dict[str, int]  # the spec's integer and flag variables (num_heads, pre_norm, ...)


def read_ct2_weights(path: Path) -> Ct2Weights:
    """Every variable of the model file at `path`; raises `UnreadableWeights` for a file this
    reader does not take and `OSError` for one it cannot open."""
    with open(path, "rb") as file:
        try:  # mapped, not read: the pages of variables never used (a Whisper's encoder) stay on disk
            data = memoryview(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ))
        except ValueError:  # an empty file
            raise UnreadableWeights(f"{path}: the file is empty") from None
    reader = _Reader(data, Path(path))
    version = reader.unpack("I")
    if version not in SUPPORTED_VERSIONS:
        raise UnreadableWeights(f"{path}: CTranslate2 model format {version} is not one of {SUPPORTED_VERSIONS}")
    spec = reader.string()
    reader.unpack("I")  # the spec's revision
    arrays: dict[str, np.ndarray] = {}
    scalars: dict[str, int] = {}
    for _ in range(reader.unpack("I")):
        name = reader.string()
        shape = tuple(reader.unpack("I") for _ in range(reader.unpack("B")))
        dtype = reader.unpack("B")
        raw = reader.take(reader.unpack("I"))
        if dtype in _FLOAT_TYPES:
            arrays[name] = np.frombuffer(raw, dtype=_FLOAT_TYPES[dtype]).reshape(shape)
        elif dtype in _OTHER_TYPES and not shape:
            scalars[name] = int(np.frombuffer(raw, dtype=_OTHER_TYPES[dtype])[0])
        elif dtype in _OTHER_TYPES:
            raise UnreadableWeights(f"{path}: {name} is stored as {_OTHER_TYPES[dtype]} (a model quantized "
                                    "at conversion); only float16 and float32 weights are read")
        else:
            raise UnreadableWeights(f"{path}: {name} has an unknown data type {dtype}")
    if version >= 6:
        for _ in range(reader.unpack("I")):
            alias, target = reader.string(), reader.string()
            if target in arrays:
                arrays[alias] = arrays[target]
    if reader.offset != len(data):
        raise UnreadableWeights(f"{path}: {len(data) - reader.offset} bytes left after the last variable")
    return Ct2Weights(spec, arrays, scalars)


class _Reader:
    def __init__(self, data: memoryview, path: Path):
        self.data, self.path, self.offset = data, path, 0

    def take(self, n: int) -> memoryview:
        if self.offset + n > len(self.data):
            raise UnreadableWeights(f"{self.path}: the file ends inside a variable (truncated?)")
        chunk = self.data[self.offset:self.offset + n]
        self.offset += n
        return chunk

    def unpack(self, fmt: str) -> int:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))[0]

    def string(self) -> str:
        return bytes(self.take(self.unpack("H"))).rstrip(b"\0").decode("utf-8")
