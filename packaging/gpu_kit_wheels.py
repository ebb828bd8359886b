"""The wheels the GPU kit carries to a lent GPU machine: the packages its measured paths import
that the machine's image lacks (`gpu_image_packages.txt`), each at the version installed here,
downloaded for that machine (CPython 3.12, manylinux x86_64), without their dependencies.

    python3 packaging/gpu_kit_wheels.py list            # what would be carried, and why
    python3 packaging/gpu_kit_wheels.py download .whl   # fetch them (pip download)
    python3 packaging/gpu_kit_wheels.py download-zonos .whl/zonos/wheels   # what Zonos needs

Standard library only (run it with the project's Python: versions are read from what is installed).
"""
from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

IMAGE_LIST = Path(__file__).with_name("gpu_image_packages.txt")
# What the kit's sections import that the image lacks (found with `python -X importtime` and the
# kit's own import check, tests/test_gpu_kit.py): distribution -> why.
CARRIED = {
    "platformdirs": "fixture and config folders (engine fixtures, app settings)",
    "soundfile": "reading the request recording and writing the spoken reply (bundles libsndfile)",
    "cffi": "soundfile's binding to libsndfile",
    "pycparser": "cffi's C parser",
    "soxr": "resampling the recording to 16 kHz (audio/resample.py)",
    "webrtcvad-wheels": "the replay's voice activity detector (audio/vad.py)",
}
# What Zonos imports that the image lacks, pinned (Zonos is not installed here, so no version can be
# read from this machine): carried only with Zonos's source (`gpu_kit.sh prepare` with
# FORESAY_ZONOS_SOURCE). sudachidict-full (Japanese, over 60 MB) stays behind: the kit's Zonos
# section imports Zonos without it (app/bench/zonos_random.py).
ZONOS_CARRIED = {
    "inflect": "7.6.0", "more-itertools": "11.2.1", "typeguard": "4.6.1", "jaraco.functools": "4.6.0",
    "kanjize": "1.6.1", "phonemizer": "3.4.0", "dlinfo": "2.0.0", "sudachipy": "0.7.0",
}
PYTHON = "3.12"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def image_packages(path: Path = IMAGE_LIST) -> set[str]:
    """The image's distributions, normalized; '#' starts a comment."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text("utf-8").splitlines())
    return {normalized(line) for line in lines if line}


def missing_from_image(names, image: set[str]) -> list[str]:
    """`names` that the image does not have, in their order."""
    return [name for name in names if normalized(name) not in image]


def none_in_image(names, image: set[str] | None = None) -> list[str]:
    """`names`, as a list; a name the image already has is an error (two versions of one package
    would stop the install on the GPU machine)."""
    image = image_packages() if image is None else image
    present = [name for name in names if name not in missing_from_image([name], image)]
    if present:
        raise SystemExit(f"gpu_kit_wheels: {', '.join(present)} already in the GPU image; do not carry them")
    return list(names)


def carried(image: set[str] | None = None) -> list[str]:
    """The distributions to carry."""
    return none_in_image(CARRIED, image)


def requirements(names: list[str]) -> list[str]:
    """NAME==VERSION of each, at the version installed here (what the tests here ran with)."""
    pins = []
    for name in names:
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            raise SystemExit(f"gpu_kit_wheels: {name} is not installed here; install the project first "
                             "(packaging/bootstrap.sh)") from None
    return pins


def _pip_download(dest: Path, pins: list[str]) -> None:
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
               "--python-version", PYTHON, "--implementation", "cp", "-d", str(dest)]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    subprocess.run(command + pins, check=True)


def zonos_carried(image: set[str] | None = None) -> list[str]:
    """Zonos's pinned dependencies to carry (NAME==VERSION)."""
    return [f"{name}=={ZONOS_CARRIED[name]}" for name in none_in_image(ZONOS_CARRIED, image)]


def download_zonos(dest: Path) -> list[Path]:
    for wheel in dest.glob("*.whl"):
        wheel.unlink()
    _pip_download(dest, zonos_carried())
    return sorted(dest.glob("*.whl"))


def download(dest: Path) -> list[Path]:
    _pip_download(dest, requirements(carried()))
    wanted = {normalized(name) for name in CARRIED}
    wheels = sorted(dest.glob("*.whl"))
    stale = [w for w in wheels if normalized(w.name.split("-")[0]) not in wanted
             or w.name.split("-")[1] != metadata.version(w.name.split("-")[0].replace("_", "-"))]
    for wheel in stale:  # another version or a package no longer carried: two would break the install
        wheel.unlink()
    return sorted(dest.glob("*.whl"))


def main(argv: list[str]) -> int:
    if argv[:1] == ["list"]:
        for name, pin in zip(carried(), requirements(carried())):
            print(f"{pin:32} {CARRIED[name]}")
        return 0
    if len(argv) == 2 and argv[0] in ("download", "download-zonos"):
        dest = Path(argv[1])
        dest.mkdir(parents=True, exist_ok=True)
        for wheel in (download if argv[0] == "download" else download_zonos)(dest):
            print(f"{wheel.stat().st_size / 2**20:6.2f} MiB  {wheel.name}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
