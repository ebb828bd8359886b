"""First-run downloads: which hub models a profile fetches, progress events, the offline hint."""
import socket
import threading

import pytest

from foresay.app.config import PROFILES, default_config_path, load_settings
from foresay.app.downloads import (
    CT2_WHISPER_FILES, LLM_FILES, WHISPER_FILES, DownloadProgress, HubDownload, download, hub_downloads,
    is_hub_id, offline_hint, offline_profiles,
)
from foresay.engine.errors import ModelUnavailable

from test_pipeline import settings  # noqa: F401  (fixture)


def repos(profile, **overrides):
    sets = [f"{k}={v}" for k, v in overrides.items()]
    return [(d.repo_id, d.files) for d in hub_downloads(load_settings(profile=profile, overrides=sets))]


def test_each_profile_fetches_the_models_its_loaders_read(tmp_path):
    assert repos("cpu", ) == [("Qwen/Qwen2.5-0.5B-Instruct", LLM_FILES),
                              ("Systran/faster-whisper-base.en", CT2_WHISPER_FILES)]
    assert repos("gpu-24gb") == [("Qwen/Qwen2.5-7B-Instruct", LLM_FILES),
                                 ("openai/whisper-medium.en", WHISPER_FILES),
                                 ("openai/whisper-tiny.en", WHISPER_FILES)]
    assert repos("tiny-random") == []  # built-in fixtures: nothing to download
    local = tmp_path / "my-model"
    local.mkdir()
    assert repos("cpu", **{"llm.model": f'"{local}"'}) == [("Systran/faster-whisper-base.en", CT2_WHISPER_FILES)]


def test_hub_ids_are_owner_slash_name_and_not_paths(tmp_path):
    assert is_hub_id("Qwen/Qwen2.5-7B-Instruct")
    for name in ("tiny-random", "", "./a/b", "/abs/path", "~/x", "a/b/c", "a/", str(tmp_path)):
        assert not is_hub_id(name), name


def test_patterns_match_what_the_loaders_ask_the_hub_for(monkeypatch, tmp_path):
    import faster_whisper.utils
    import huggingface_hub

    from foresay.engine.asr.whisper.models import WhisperModelConfig, resolve_folder

    asked = []

    def fake_snapshot_download(repo_id, **kwargs):
        asked.append((repo_id, tuple(kwargs["allow_patterns"])))
        return str(tmp_path)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    resolve_folder(WhisperModelConfig("openai/whisper-tiny.en"))
    faster_whisper.utils.download_model("base.en")
    assert asked == [("openai/whisper-tiny.en", WHISPER_FILES),
                     ("Systran/faster-whisper-base.en", CT2_WHISPER_FILES)]


def hub_like_download(total_bytes: int, files: int, workers: int = 3):
    """A stand-in for huggingface_hub.snapshot_download that drives the given tqdm class the way
    the installed hub client does (its own progress-bar helpers, several download threads)."""
    from huggingface_hub.utils.tqdm import _create_progress_bar, hf_thread_map

    def fake(repo_id, revision=None, allow_patterns=None, tqdm_class=None):
        bars = [_create_progress_bar(cls=tqdm_class, log_level=20, name=n, desc=n, total=0, initial=0,
                                     unit="B", unit_scale=True) for n in ("transfer", "reconstruct")]
        lock = threading.Lock()
        per_file = total_bytes // files

        def fetch_one(_name):
            with lock:
                for bar in bars:
                    bar.total += per_file
            for _ in range(4):
                with lock:
                    for bar in bars:
                        bar.update(per_file // 4)
        hf_thread_map(fetch_one, [f"f{i}" for i in range(files)], desc="Fetching", max_workers=workers,
                      tqdm_class=tqdm_class)
        return "/nowhere"
    return fake


def test_download_progress_is_reported_in_bytes_and_ends_finished():
    events = []
    item = HubDownload("org/model", LLM_FILES, what="language model")
    download(item, events.append, snapshot_download=hub_like_download(8_000_000, files=4))
    assert all(e.component == "download of org/model" for e in events)
    assert events[0].total is None and not events[0].finished  # shown at once, size unknown
    sized = [e for e in events if e.total]
    assert sized[-1].finished and sized[-1].done == sized[-1].total == 8_000_000
    assert sized[-1].label == "language model, 0.01 of 0.01 GB"
    assert [e.done for e in sized] == sorted(e.done for e in sized)  # never goes backwards


def test_progress_is_rate_limited_but_the_last_update_always_goes_out():
    clock = [0.0]
    events = []
    progress = DownloadProgress(HubDownload("org/model", LLM_FILES), events.append, min_interval_s=1.0,
                                clock=lambda: clock[0])
    bar = progress.bar_class()(total=100, unit="B")
    for _ in range(9):
        bar.update(10)  # all within the same second: only the first is sent
    clock[0] = 0.5
    bar.update(10)      # reaches the total: sent even inside the interval
    assert [e.done for e in events] == [0.0, 100.0]
    assert bar.format_dict["n"] == 100  # the bar still counts (display is what is switched off)


def test_files_are_counted_when_the_hub_gives_no_byte_sizes():
    events = []
    progress = DownloadProgress(HubDownload("org/model", LLM_FILES, what="speech recognizer"), events.append,
                                min_interval_s=0)
    bar = progress.bar_class()(total=3)
    bar.update(2)
    assert events[-1].label == "speech recognizer, file 2 of 3" and events[-1].done == 2


def test_a_model_missing_offline_names_the_offline_profile():
    # conftest sets HF_HUB_OFFLINE=1: the real hub client cannot fetch anything here
    events = []
    with pytest.raises(ModelUnavailable) as err:
        download(HubDownload("nobody/missing-model", LLM_FILES, what="language model"), events.append)
    text = str(err.value)
    assert "nobody/missing-model" in text and "--profile demo" in text
    assert events[-1].finished  # the status bar does not keep a dead download
    assert str(default_config_path()) in text  # the file to edit, with its path


def test_a_failed_download_says_why_in_one_plain_clause():
    """The hub client wraps a failed name look-up three times; the message says what happened,
    without nested parentheses or exception names."""
    def no_network(*args, **kwargs):
        try:
            try:
                raise socket.gaierror(-2, "Name or service not known")
            except OSError as exc:
                raise ConnectionError(f"ConnectError: {exc}") from exc
        except ConnectionError as exc:
            raise RuntimeError(f"Got: {exc}\nAn error happened while trying to locate the files") from exc

    with pytest.raises(ModelUnavailable) as err:
        download(HubDownload("owner/model", LLM_FILES, what="language model"), lambda e: None,
                 snapshot_download=no_network)
    first = str(err.value).split(". ")[0]
    assert first == ("the language model 'owner/model' is not downloaded yet and cannot be downloaded "
                     "now: no network connection (the hub's address cannot be looked up)")
    assert "Error" not in str(err.value) and ")." not in str(err.value).replace("looked up).", "")


def test_offline_profiles_download_nothing_and_are_offered(monkeypatch):
    import foresay.app.downloads as downloads
    assert offline_profiles() == ["demo", "tiny-random"]
    for name in offline_profiles():
        assert hub_downloads(load_settings(profile=name)) == [], name
    assert hub_downloads(load_settings(profile="cpu"))  # a profile that does download
    assert "'demo' or 'tiny-random'" in offline_hint() and "--profile demo" in offline_hint()
    monkeypatch.setattr(downloads, "OFFLINE_PROFILES", ("tiny-random",))
    assert offline_profiles() == ["tiny-random"] and "'demo'" not in offline_hint()


def test_the_pipeline_reports_download_progress_on_the_event_loop(monkeypatch, settings):  # noqa: F811
    import asyncio

    from foresay.app import assemble
    from foresay.engine.events import LoadProgress

    def fake_download_models(_settings, emit):
        emit(LoadProgress(0, 0.0, "download of org/model", "language model", 5, 10))
        raise ModelUnavailable("stop here")

    monkeypatch.setattr(assemble, "download_models", fake_download_models)
    seen = []

    async def main():
        loop_thread = threading.get_ident()
        with pytest.raises(ModelUnavailable):
            await assemble.build_pipeline(settings, None, None, [lambda e: seen.append((e, threading.get_ident()))])
        return loop_thread

    loop_thread = asyncio.run(main())
    assert [(e.component, e.done, thread) for e, thread in seen] == [("download of org/model", 5, loop_thread)]


def test_a_whisper_name_the_registry_carries_is_not_downloaded_when_fetched(monkeypatch, tmp_path):
    """`--set asr.target=tiny.en` offline: the fetched registry copy serves, the hub is not asked."""
    from foresay.engine import registry_models

    monkeypatch.setenv("FORESAY_REGISTRY_DIR", str(tmp_path))
    sets = {"asr.backend": "faster-whisper", "asr.target": "tiny.en", "asr.draft": ""}
    assert [r for r, _ in repos("tiny-random", **sets)] == ["Systran/faster-whisper-tiny.en"]
    (tmp_path / "whisper-tiny.en").mkdir()
    (tmp_path / "whisper-tiny.en" / registry_models.MARKER).write_text("{}")
    assert repos("tiny-random", **sets) == []
