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


def test_a_missing_output_device_is_a_problem_as_it_is_for_the_window(monkeypatch):
    import sounddevice as sd

    monkeypatch.setattr(sd, "query_devices", lambda: [{"name": "mic", "max_input_channels": 1,
                                                       "max_output_channels": 0}])
    checks = {c.name: c for c in doctor.check_portaudio()}
    assert checks["input device"].ok
    assert not checks["output device"].ok and checks["output device"].essential
    assert "replay" in checks["output device"].fix


def test_models_missing_while_offline_are_a_problem_not_ok(monkeypatch):
    from foresay.app.config import load_settings

    cpu = load_settings(profile="cpu")
    monkeypatch.setattr(doctor, "_cached", lambda repo: False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    [check] = doctor.check_models(cpu)
    assert not check.ok and check.essential and "offline (HF_HUB_OFFLINE=1)" in check.detail
    assert "--profile demo" in check.fix
    monkeypatch.setattr(doctor, "_offline", lambda: None)
    [check] = doctor.check_models(cpu)
    assert not check.ok and not check.essential and "first use" in check.detail
    [check] = doctor.check_models(load_settings(profile="demo"))
    assert check.ok and "nothing to download" in check.detail


def test_without_a_network_doctor_says_so(monkeypatch):
    from foresay.app.config import load_settings

    monkeypatch.setattr(doctor, "_cached", lambda repo: False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", "https://no-such-host.invalid")  # a name that never resolves
    [check] = doctor.check_models(load_settings(profile="cpu"))
    assert not check.ok and check.essential
    assert "no network connection (no-such-host.invalid cannot be looked up)" in check.detail
