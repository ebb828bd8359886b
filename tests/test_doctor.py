from foresay.app import doctor
from foresay.app.cli import main


def test_doctor_reports_each_check_and_fails_only_on_essentials(capsys, monkeypatch):
    monkeypatch.setattr(doctor, "CHECKS", [
        lambda: [doctor.Check("thing", True, "fine")],
        lambda: [doctor.Check("gpu", False, "none", "buy one", essential=False)]])
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "[ok  ] thing: fine" in out and "[note] gpu: none" in out and "fix: buy one" in out
    monkeypatch.setattr(doctor, "CHECKS", [lambda: [doctor.Check("espeak-ng", False, "missing", "apt install")]])
    assert main(["doctor"]) == 1
    assert "doctor: 1 problem(s) to fix" in capsys.readouterr().out


def test_real_checks_find_the_installed_stack():
    results = {c.name: c for c in doctor.run_checks([doctor.check_packages, doctor.check_espeak,
                                                     doctor.check_zonos])}
    assert results["python package torch"].ok
    assert results["espeak-ng"].ok  # installed by the bootstrap
    assert not results["Zonos TTS"].essential
