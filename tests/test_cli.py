from foresay.app.cli import main


def test_version(capsys):
    try:
        main(["--version"])
    except SystemExit as exc:
        assert exc.code == 0
    assert capsys.readouterr().out.startswith("foresay ")


def test_options_without_a_command_go_to_the_window(monkeypatch):
    """`foresay --profile demo` (what the README and the offline hint say) opens the window."""
    from foresay.app import cli, commands

    seen = []
    monkeypatch.setattr(commands, "run_live", lambda args: seen.append(args) or 0)
    assert main(["--profile", "demo"]) == 0 and main([]) == 0
    assert [(a.command, a.profile) for a in seen] == [("run", "demo"), ("run", None)]
    assert cli.with_command(["replay", "x.wav"]) == ["replay", "x.wav"]
    assert cli.with_command(["--version"]) == ["--version"]
