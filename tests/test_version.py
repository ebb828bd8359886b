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
def test_a_checkout_reports_its_commit_without_running_git(capsys, monkeypatch):
    expected = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=7", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()

    def no_git(*args, **kwargs):
        raise AssertionError(f"a git command ran: {args}")
    monkeypatch.setattr(subprocess, "run", no_git)
    monkeypatch.setattr(subprocess, "Popen", no_git)
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"foresay {version.package_version()} (git {expected})"


def test_worktrees_and_packed_refs_are_read(tmp_path):
    sha = "0123456789abcdef0123456789abcdef01234567"
    main_git = tmp_path / "repo" / ".git"
    (main_git / "worktrees" / "wt").mkdir(parents=True)
    (main_git / "packed-refs").write_text(f"# pack-refs with: peeled\n{sha} refs/heads/feature\n")
    wt_git = main_git / "worktrees" / "wt"
    (wt_git / "HEAD").write_text("ref: refs/heads/feature\n")
    (wt_git / "commondir").write_text("../..\n")
    checkout = tmp_path / "wt"
    checkout.mkdir()
    (checkout / ".git").write_text(f"gitdir: {wt_git}\n")
    assert version._checkout_revision(checkout) == sha[:7]


def test_commands_do_not_ask_for_the_version(monkeypatch):
    from foresay.app import cli
    monkeypatch.setattr(cli, "version_line", lambda: (_ for _ in ()).throw(AssertionError("asked")))
    cli.build_parser().parse_args(["doctor"])


def test_no_record_and_no_checkout_is_unknown(monkeypatch, tmp_path):
    monkeypatch.setattr(version, "_build_info", lambda: None)
    assert version._checkout_revision(tmp_path) is None
    monkeypatch.setattr(version, "_checkout_revision", lambda folder: None)
    assert version.git_revision() == "unknown"
