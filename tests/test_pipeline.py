"""The whole pipeline on recordings, with the tiny fixtures: replay, barge-in, push-to-talk."""
import asyncio
import subprocess
import wave

import numpy as np
import pytest

from foresay.app.commands import replay
from foresay.app.config import load_settings
from foresay.engine.errors import ModelUnavailable
from foresay.engine.events import AssistantIntro, AudioChunk, FinalTranscript, SentenceReady, StatusMessage


def speak(text: str, path) -> tuple[np.ndarray, int]:
    subprocess.run(["espeak-ng", "-w", str(path), text], check=True)
    with wave.open(str(path)) as w:
        rate = w.getframerate()
        return np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16), rate


def recording(tmp_path, texts, gap_s=1.8) -> str:
    parts, rate = [], None
    for i, text in enumerate(texts):
        samples, rate = speak(text, tmp_path / f"u{i}.wav")
        parts += [np.zeros(int(0.4 * rate), np.int16), samples, np.zeros(int(gap_s * rate), np.int16)]
    out = tmp_path / "turns.wav"
    with wave.open(str(out), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.concatenate(parts).tobytes())
    return out


@pytest.fixture
def settings(tmp_path, fixture_dir):
    config = tmp_path / "config.toml"
    config.write_text(f'[app]\nprofile = "tiny-random"\nhistory_dir = "{tmp_path / "history"}"\n'
                      '[predgen]\nmax_new_tokens = 16\n[tts]\nengine = "espeak"\n')
    return load_settings(config)


@pytest.fixture(params=["espeak", "piper"])
def voiced(request, settings):
    """The settings with each CPU voice (Piper: the registry's voice, loaded once per session)."""
    from dataclasses import replace

    if request.param == "piper":
        request.getfixturevalue("shared_piper")
    return replace(settings, tts=replace(settings.tts, engine=request.param))


def test_replay_answers_each_turn_and_writes_the_reply(tmp_path, voiced):
    audio = recording(tmp_path, ["What is the weather in Paris today?", "And tomorrow?"])
    out = tmp_path / "reply.wav"
    seen = []
    metrics = asyncio.run(replay(voiced, audio, out, [seen.append], realtime=False))
    assert [m["turn"] for m in metrics] == [1, 2]
    for m in metrics:
        assert m["user_text"].strip() and m["reply_text"].strip()
        assert m["outcome"] in ("accepted", "partial", "rejected")
        assert m["endpoint_delay_ms"] > 0 and m["nfetfs"] >= 1 and m["audio_latency_ms"] >= 0
    with wave.open(str(out)) as w:
        assert w.getnframes() > 0.2 * w.getframerate()
    # the window hears the reply being spoken, and each turn's transcript is shown once
    assert {e.turn_id for e in seen if isinstance(e, AudioChunk)} == {1, 2}
    finals = [e.turn_id for e in seen if isinstance(e, FinalTranscript)]
    assert finals == [1, 2]
    assert len([e for e in seen if isinstance(e, SentenceReady)]) >= 2
    # once loaded: the chat model's intro (none for a general model: it clears a demo's), the ear, the voice
    assert [e.knows for e in seen if isinstance(e, AssistantIntro)] == [""]
    ready = [e.text for e in seen if isinstance(e, StatusMessage) and e.text.startswith("ready:")]
    assert len(ready) == 1 and ("voice: Piper" if voiced.tts.engine == "piper" else "voice: espeak-ng") in ready[0]
    assert ready[0].startswith("ready: tiny-random profile, ") and "hearing with tiny-random + tiny-random-draft (specasr); " in ready[0]


def test_barge_in_keeps_only_the_heard_part_in_history(tmp_path, voiced):
    from foresay.app.assemble import build_pipeline
    from foresay.app.history import HistoryStore
    from foresay.audio.files import FileSource
    from foresay.audio.wav_sink import WavSink

    audio = recording(tmp_path, ["Tell me a long story about a dragon."], gap_s=4.0)

    async def main():
        history = HistoryStore(tmp_path / "h")
        holder = {}

        def stop_after_first_sentence(event):
            if isinstance(event, SentenceReady) and event.index == 0:
                asyncio.get_running_loop().call_later(0.2, holder["p"].stop_reply)
        pipeline = await build_pipeline(voiced, FileSource(audio, realtime=True, pad_s=1.0),
                                         WavSink(tmp_path / "o.wav", realtime=True),
                                         [stop_after_first_sentence], history=history)
        holder["p"] = pipeline
        await pipeline.run()
        pipeline.close()
        return pipeline, history

    pipeline, history = asyncio.run(main())
    assert pipeline.metrics and pipeline.metrics[0]["interrupted"]
    full = pipeline.llm.conv.lm.decode(pipeline.llm.turn.reply_ids())
    heard = history.turns[-1].assistant
    assert history.turns[-1].interrupted and len(heard) < len(full) and full.startswith(heard)


def test_push_to_talk_turn(tmp_path, voiced):
    from dataclasses import replace

    from foresay.app.assemble import build_pipeline
    from foresay.audio.files import FileSource
    from foresay.audio.wav_sink import WavSink

    audio = recording(tmp_path, ["Set a timer for ten minutes."], gap_s=2.5)
    ptt = replace(voiced, app=replace(voiced.app, mode="push-to-talk"))

    async def main():
        pipeline = await build_pipeline(ptt, FileSource(audio, realtime=True), WavSink(tmp_path / "o.wav"))
        loop = asyncio.get_running_loop()
        loop.call_later(0.1, pipeline.press_ptt)
        loop.call_later(2.2, pipeline.release_ptt)
        await pipeline.run()
        pipeline.close()
        return pipeline

    pipeline = asyncio.run(main())
    assert len(pipeline.metrics) == 1
    assert pipeline.metrics[0]["endpoint_delay_ms"] >= 0


def test_missing_model_is_a_clear_error(tmp_path, fixture_dir):
    config = tmp_path / "c.toml"
    config.write_text('[app]\nprofile = "tiny-random"\n[llm]\nmodel = "nobody/missing-model"\n')
    settings = load_settings(config)
    with pytest.raises(ModelUnavailable, match="nobody/missing-model"):
        asyncio.run(replay(settings, recording(tmp_path, ["Hello."]), None, realtime=False))


def test_offline_missing_model_names_the_offline_profile(tmp_path, fixture_dir):
    config = tmp_path / "c.toml"
    config.write_text('[app]\nprofile = "tiny-random"\n[asr]\ntarget = "openai/whisper-nothing"\n'
                      'draft = "openai/whisper-nothing-draft"\n')
    with pytest.raises(ModelUnavailable, match="offline 'tiny-random' profile does not ship this model"):
        asyncio.run(replay(load_settings(config), recording(tmp_path, ["Hello."]), None, realtime=False))


def test_missing_input_device_is_a_clear_error(tmp_path, fixture_dir, capsys):
    from foresay.app.cli import main
    config = tmp_path / "c.toml"
    config.write_text(f'[app]\nprofile = "tiny-random"\nhistory_dir = "{tmp_path}"\n'
                      '[audio]\ninput_device = "no-such-microphone"\n')
    assert main(["run", "--no-ui", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    # this machine has no sound hardware; with some, the name is what fails to match
    assert "foresay: error:" in err and ("no-such-microphone" in err or "no input device found" in err)


def test_replay_command_writes_metrics_jsonl(tmp_path, fixture_dir, capsys):
    import json

    from foresay.app.cli import main
    from foresay.app.turn_log import METRIC_NAMES
    config = tmp_path / "c.toml"
    config.write_text('[app]\nprofile = "tiny-random"\n[predgen]\nmax_new_tokens = 12\n')
    audio = recording(tmp_path, ["What is the capital of Japan?"])
    out, metrics = tmp_path / "reply.wav", tmp_path / "m.jsonl"
    assert main(["replay", str(audio), "--out", str(out), "--metrics", str(metrics), "--fast",
                 "--config", str(config)]) == 0
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert len(lines) == 1 and set(METRIC_NAMES) <= set(lines[0])
    printed = capsys.readouterr().out
    assert "you:" in printed and "foresay:" in printed and "[turn 1:" in printed
    assert out.stat().st_size > 44


def test_a_zonos_profile_without_zonos_speaks_with_espeak(tmp_path, settings):
    from dataclasses import replace

    from foresay.app.assemble import build_pipeline
    from foresay.audio.files import FileSource
    from foresay.audio.wav_sink import WavSink
    from foresay.engine.events import StatusMessage

    seen = []
    zonos = replace(settings, tts=replace(settings.tts, engine="zonos"))

    async def main():
        pipeline = await build_pipeline(zonos, FileSource(recording(tmp_path, ["Hi."])),
                                         WavSink(tmp_path / "o.wav", realtime=False), [seen.append])
        pipeline.close()
        return pipeline

    pipeline = asyncio.run(main())
    assert pipeline.speaker.tts.name != "zonos"
    assert any(isinstance(e, StatusMessage) and "voice: espeak-ng" in e.text and "Zonos is not installed" in e.text
               for e in seen)


def test_speaking_over_the_reply_interrupts_it_and_starts_the_next_turn(tmp_path, settings):
    from dataclasses import replace

    from foresay.app.assemble import build_pipeline
    from foresay.audio.files import FileSource
    from foresay.audio.wav_sink import WavSink
    from foresay.engine.events import Interrupt

    # The second request starts 6 s after the first ends: the first reply (48 tokens of the random
    # model, spoken by espeak-ng) is playing by then.
    audio = recording(tmp_path, ["Tell me a long story about dragons.",
                                 "Stop, what is the weather in Paris?"], gap_s=6.0)
    long_reply = replace(settings, predgen=replace(settings.predgen, max_new_tokens=48))
    seen = []

    async def main():
        pipeline = await build_pipeline(long_reply, FileSource(audio, realtime=True),
                                         WavSink(tmp_path / "o.wav", realtime=True), [seen.append])
        await pipeline.run()
        pipeline.close()
        return pipeline

    pipeline = asyncio.run(main())
    assert any(isinstance(e, Interrupt) for e in seen)
    first, second = pipeline.metrics[0], pipeline.metrics[1]
    assert first["interrupted"] and not second["interrupted"]
    assert second["user_text"].strip() and second["reply_text"].strip()


def test_all_model_work_runs_on_the_stages_worker_threads(tmp_path, settings, monkeypatch):
    """Nothing touches a model on the event loop: every LLM pass runs on the LLM stage's thread
    (building a turn's state may prefill the history, which is a pass too)."""
    import threading

    from foresay.engine.llm.model import ChatLM

    threads = set()
    real_forward = ChatLM.forward

    def spy(self, *args, **kwargs):
        threads.add(threading.current_thread().name)
        return real_forward(self, *args, **kwargs)
    monkeypatch.setattr(ChatLM, "forward", spy)
    audio = recording(tmp_path, ["What is the weather in Paris today?"])
    metrics = asyncio.run(replay(settings, audio, None, realtime=False))
    assert len(metrics) == 1 and threads and all(t.startswith("foresay-llm") for t in threads), threads


def test_speech_running_to_the_end_of_the_file_is_still_answered(tmp_path, settings):
    from foresay.app.assemble import build_pipeline
    from foresay.audio.files import FileSource
    from foresay.audio.wav_sink import WavSink

    audio = recording(tmp_path, ["Set a timer for ten minutes please."], gap_s=0.0)

    async def main():
        pipeline = await build_pipeline(settings, FileSource(audio, realtime=False, pad_s=0.0),
                                         WavSink(tmp_path / "o.wav", realtime=False), wait_for_replies=True)
        await pipeline.run()
        pipeline.close()
        return pipeline

    pipeline = asyncio.run(main())
    assert len(pipeline.metrics) == 1 and pipeline.metrics[0]["user_text"].strip()


def test_a_history_that_cannot_be_written_never_stops_the_conversation(tmp_path, settings):
    from foresay.app.assemble import build_pipeline
    from foresay.app.history import HistoryStore
    from foresay.audio.files import FileSource
    from foresay.audio.wav_sink import WavSink
    from foresay.engine.events import StatusMessage

    audio = recording(tmp_path, ["What is the weather in Paris today?", "And tomorrow?"])
    history = HistoryStore(tmp_path / "h")

    def read_only(turn):
        raise PermissionError(13, "Permission denied", str(history.path))
    history.append = read_only
    seen = []

    async def main():
        pipeline = await build_pipeline(settings, FileSource(audio, realtime=False, pad_s=2.0),
                                        WavSink(tmp_path / "o.wav", realtime=False), [seen.append],
                                        history=history, wait_for_replies=True)
        try:
            await asyncio.wait_for(pipeline.run(), 120)   # every turn closes: the run ends
        finally:
            pipeline.close()
        return pipeline

    pipeline = asyncio.run(main())
    assert [m["turn"] for m in pipeline.metrics] == [1, 2]
    assert [t.user for _, t in history.unsaved] == [m["user_text"] for m in pipeline.metrics]
    warnings = [e.text for e in seen if isinstance(e, StatusMessage) and e.level == "warning"]
    assert len(warnings) == 1 and "Permission denied" in warnings[0]


def test_a_reply_wav_on_a_full_disk_ends_the_replay_with_an_error(tmp_path, settings, monkeypatch):
    import soundfile as sf

    from foresay.audio.errors import AudioFileError
    from foresay.engine.events import TurnMetrics

    audio = recording(tmp_path, ["What is the weather in Paris today?", "And tomorrow?"])
    real_write, calls = sf.SoundFile.write, []

    def fills_up(self, data):
        calls.append(len(data))
        if len(calls) > 3:
            raise sf.LibsndfileError(0, "System error.")   # what libsndfile says on a full disk
        return real_write(self, data)
    monkeypatch.setattr(sf.SoundFile, "write", fills_up)
    seen = []
    with pytest.raises(AudioFileError, match="cannot write .*reply audio were written"):
        asyncio.run(asyncio.wait_for(replay(settings, audio, tmp_path / "o.wav", [seen.append], realtime=False), 120))
    metrics = [e.values for e in seen if isinstance(e, TurnMetrics)]
    assert [m["turn"] for m in metrics] == [1, 2]   # the conversation went on to its end
    # faster than real time: figures comparing the recording's time with the clock are left out
    assert all(m["asr_final_ms"] is None and m["voice_to_voice_ms"] is None for m in metrics)
    assert all(m["endpoint_delay_ms"] > 0 and m["audio_latency_ms"] >= 0 for m in metrics)


def test_numpy_blas_keeps_to_one_thread_once_the_pipeline_shares_the_cores(settings):
    from threadpoolctl import threadpool_info, threadpool_limits

    from foresay.app.assemble import share_cores

    def blas_threads():
        return {lib["filepath"]: lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    assert blas_threads(), "numpy reports no BLAS library"
    with threadpool_limits(2, user_api="blas"):   # as on any machine of 2 cores or more; restored on leaving
        share_cores(settings)
        assert set(blas_threads().values()) == {1}
