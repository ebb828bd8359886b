"""Builds the one-folder Foresay app for this platform with PyInstaller (packaging/foresay.spec).

    python packaging/build.py [--tarball] [--dist DIR]

Steps: stage the sources as the `foresay` namespace under build/stage (with a generated
`foresay/app/_build_info.py` recording the version and git revision; the checkout is never
written to), run PyInstaller, and on Linux optionally pack dist/foresay-VERSION-linux-ARCH.tar.gz
with the desktop-entry installer. The bundle's torch is the build environment's torch: a CPU
wheel gives a CPU-only app, a CUDA wheel a GPU app (see docs/packaging.md).
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The installed namespace: pyproject's package-dir, folder by folder.
NAMESPACE = {"app": "app", "engine": "engine", "audio": "audio", "ui": "ui", "assets": "assets"}


class BuildError(Exception):
    """A build step failed; the message says which and why."""


def project_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["version"]


def checkout_revision() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--tags"],
                             capture_output=True, text=True, timeout=10)
    except OSError:
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def stage_sources(stage: Path, version: str, revision: str) -> Path:
    """Copies the package folders to stage/foresay/... and writes the build record there."""
    if stage.exists():
        shutil.rmtree(stage)
    target = stage / "foresay"
    for sub, folder in NAMESPACE.items():
        shutil.copytree(ROOT / folder, target / sub, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    built = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    (target / "app" / "_build_info.py").write_text(
        '"""Written by packaging/build.py when this bundle was built."""\n'
        f"VERSION = {version!r}\nGIT_REVISION = {revision!r}\nBUILT_AT = {built!r}\n", "utf-8")
    return stage


def run_pyinstaller(stage: Path, dist: Path, work: Path, version: str) -> Path:
    env = dict(os.environ, FORESAY_STAGE=str(stage), FORESAY_VERSION=version,
               # the staged copy, not the editable install, is what gets analysed and bundled
               PYTHONPATH=os.pathsep.join(filter(None, [str(stage), os.environ.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "PyInstaller", "--noconfirm", "--clean", "--log-level", "WARN",
               "--distpath", str(dist), "--workpath", str(work), str(ROOT / "packaging" / "foresay.spec")]
    if subprocess.run(command, env=env, cwd=ROOT).returncode != 0:
        raise BuildError("PyInstaller failed (its log is above)")
    folder = dist / "foresay"
    if not (folder / executable_name("foresay")).exists():
        raise BuildError(f"PyInstaller finished but {folder} has no foresay executable")
    return folder


def executable_name(name: str) -> str:
    return name + ".exe" if sys.platform == "win32" else name


def linux_tarball(folder: Path, dist: Path, version: str) -> Path:
    """foresay-VERSION-linux-ARCH.tar.gz: the app folder plus the icon and the desktop-entry
    installer, unpacked anywhere and installed with ./foresay/install-desktop-entry.sh."""
    extras = {"install-desktop-entry.sh": ROOT / "packaging" / "linux" / "install-desktop-entry.sh",
              "foresay.desktop": ROOT / "packaging" / "linux" / "foresay.desktop"}
    for name, source in extras.items():
        shutil.copy2(source, folder / name)
    icons = folder / "icons"
    icons.mkdir(exist_ok=True)
    for png in (ROOT / "assets" / "icons").glob("foresay-*.png"):
        shutil.copy2(png, icons / png.name)
    shutil.copy2(ROOT / "assets" / "icons" / "foresay.svg", icons / "foresay.svg")
    archive = dist / f"foresay-{version}-linux-{platform.machine()}.tar.gz"
    with tarfile.open(archive, "w:gz", compresslevel=6) as tar:  # gzip's usual level; tarfile defaults to the slower 9
        tar.add(folder, arcname="foresay")
    return archive


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="where the app folder goes (default: dist/)")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "pyinstaller", help="PyInstaller's work folder")
    parser.add_argument("--tarball", action="store_true", help="Linux: also pack a .tar.gz of the app folder")
    args = parser.parse_args(argv)
    if args.tarball and not sys.platform.startswith("linux"):
        parser.error("--tarball is the Linux recipe; see docs/packaging.md for Windows and macOS")
    try:
        import PyInstaller  # noqa: F401
    except ImportError:
        parser.error("PyInstaller is not installed: pip install -e '.[package]'")
    start = time.monotonic()
    version, revision = project_version(), checkout_revision()
    try:
        stage = stage_sources(ROOT / "build" / "stage", version, revision)
        folder = run_pyinstaller(stage, args.dist.resolve(), args.work.resolve(), version)
        archive = linux_tarball(folder, args.dist.resolve(), version) if args.tarball else None
    except BuildError as exc:
        print(f"build: error: {exc}", file=sys.stderr)
        return 1
    print(f"build: {folder} ({folder_size(folder) / 2**20:.0f} MiB, foresay {version}, git {revision}) "
          f"in {time.monotonic() - start:.0f} s")
    if archive:
        print(f"build: {archive} ({archive.stat().st_size / 2**20:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
