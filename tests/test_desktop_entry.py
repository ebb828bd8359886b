"""The Linux menu entry and icons, installed per user by packaging/linux/install-desktop-entry.sh."""
import configparser
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "packaging" / "linux" / "install-desktop-entry.sh"
ICONS = ROOT / "assets" / "icons"


def run(*args, data: Path):
    env = dict(os.environ, XDG_DATA_HOME=str(data))
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True)


def test_installs_an_entry_that_runs_the_given_executable_and_uninstalls(tmp_path):
    exe = tmp_path / "dir with space" / "foresay"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    data = tmp_path / "share"
    out = run(str(exe), data=data)
    assert out.returncode == 0, out.stderr
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read(data / "applications" / "foresay.desktop")
    section = entry["Desktop Entry"]
    assert section["Exec"] == f'"{exe}"' and section["Icon"] == "foresay" and section["Type"] == "Application"
    for size in (16, 48, 256):
        png = data / "icons" / "hicolor" / f"{size}x{size}" / "apps" / "foresay.png"
        assert struct.unpack(">II", png.read_bytes()[16:24]) == (size, size)  # the PNG's own size
    assert (data / "icons" / "hicolor" / "scalable" / "apps" / "foresay.svg").exists()
    assert run("--uninstall", data=data).returncode == 0
    assert not (data / "applications" / "foresay.desktop").exists()
    assert not list((data / "icons").rglob("foresay.*"))


def test_refuses_a_path_that_is_not_an_executable(tmp_path):
    out = run(str(tmp_path / "nothing"), data=tmp_path / "share")
    assert out.returncode == 2 and "not an executable" in out.stderr
    assert not (tmp_path / "share" / "applications").exists()


@pytest.mark.skipif(shutil.which("desktop-file-validate") is None, reason="desktop-file-utils not installed")
def test_the_entry_template_is_valid():
    out = subprocess.run(["desktop-file-validate", str(ROOT / "packaging" / "linux" / "foresay.desktop")],
                         capture_output=True, text=True)
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout


def test_windows_and_macos_icons_hold_the_committed_pngs():
    ico = (ICONS / "foresay.ico").read_bytes()
    reserved, kind, count = struct.unpack("<HHH", ico[:6])
    assert (reserved, kind) == (0, 1) and count >= 5
    for i in range(count):
        width, _, _, _, _, _, size, offset = struct.unpack("<BBBBHHII", ico[6 + 16 * i: 22 + 16 * i])
        png = ico[offset:offset + size]
        assert png == (ICONS / f"foresay-{width or 256}.png").read_bytes()
    icns = (ICONS / "foresay.icns").read_bytes()
    assert icns[:4] == b"icns" and struct.unpack(">I", icns[4:8])[0] == len(icns)
    assert b"ic09" in icns  # the 512-pixel image macOS uses for the Dock
