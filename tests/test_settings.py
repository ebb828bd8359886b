from dataclasses import dataclass, field
from pathlib import Path

import pytest

from foresay.app.settings import ConfigError, build, merge, parse_override
from foresay.engine.errors import ForesayError


@dataclass(frozen=True)
class Inner:
    k: int = 3


@dataclass(frozen=True)
class Outer:
    name: str = "x"
    rate: float = 1.0
    flag: bool = False
    limit: int | None = None
    folder: Path | None = None
    inner: Inner = field(default_factory=Inner)
    words: tuple[str, ...] = ()

    def __post_init__(self):
        if self.rate < 0:
            raise ForesayError("rate must be >= 0")


def test_build_converts_and_nests():
    got = build(Outer, {"name": "y", "rate": 2, "limit": 5, "folder": "~/x",
                        "inner": {"k": 9}, "words": ["a", "b"]}, "outer")
    assert got == Outer("y", 2.0, False, 5, Path("~/x").expanduser(), Inner(9), ("a", "b"))


@pytest.mark.parametrize("table,message", [
    ({"nmae": "y"}, "unknown key 'outer.nmae'.*known keys of \\[outer\\]: flag, folder"),
    ({"rate": "fast"}, "outer.rate: expected a number"),
    ({"flag": 1}, "outer.flag: expected true or false"),
    ({"inner": {"j": 1}}, "unknown key 'outer.inner.j'"),
    ({"rate": -1}, "\\[outer\\]: rate must be >= 0"),
])
def test_bad_values_name_their_key(table, message):
    with pytest.raises(ConfigError, match=message):
        build(Outer, table, "outer")


def test_merge_and_overrides():
    base = {"llm": {"model": "a", "device": "cpu"}, "x": 1}
    assert merge(base, parse_override("llm.model=b")) == {"llm": {"model": "b", "device": "cpu"}, "x": 1}
    assert parse_override("predgen.max_new_tokens=64") == {"predgen": {"max_new_tokens": 64}}
    assert parse_override("llm.model=Qwen/Qwen2.5-7B-Instruct") == {"llm": {"model": "Qwen/Qwen2.5-7B-Instruct"}}
    with pytest.raises(ConfigError, match="section.key=value"):
        parse_override("nonsense")
