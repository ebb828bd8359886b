"""`foresay --version`: the package version and the git revision, from a build record or git."""
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from foresay.app import version
from foresay.app.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_a_build_record_wins_over_the_checkout(monkeypatch):
    record = types.ModuleType("foresay.app._build_info")
    record.VERSION, record.GIT_REVISION, record.BUILT_AT = "9.9.9", "v9.9.9-2-gdeadbee", "2026-01-01T00:00:00Z"
    monkeypatch.setitem(sys.modules, "foresay.app._build_info", record)
    assert version.git_revision() == "v9.9.9-2-gdeadbee"
    assert version.version_line().endswith("(git v9.9.9-2-gdeadbee)")


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")
def test_a_checkout_reports_git_describe(capsys):
    expected = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--tags"],
                              capture_output=True, text=True, check=True).stdout.strip()
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"foresay {version.package_version()} (git {expected})"


def test_no_record_and_no_checkout_is_unknown(monkeypatch, tmp_path):
    monkeypatch.setattr(version, "_build_info", lambda: None)
    assert version._describe_checkout(tmp_path) is None
    monkeypatch.setattr(version, "_describe_checkout", lambda folder: None)
    assert version.git_revision() == "unknown"
