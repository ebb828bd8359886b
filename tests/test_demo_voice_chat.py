"""The demo profile end to end, offline: a held-out request spoken in a held-out voice goes through
the whole pipeline (VAD, streaming SpecASR on the demo Whisper pair, PredGen on the demo chat
model, espeak-ng) and comes back as the domain's correct reply; with a real Whisper fetched, a
request in a real voice (Piper) is heard word for word and answered."""
import json

from foresay.app.bench.demo import held_out_requests
from foresay.app.cli import main
from foresay.app.config import load_settings


def test_the_demo_own_ear_profile_is_offline_and_uses_the_trained_pair():
    settings = load_settings(profile="demo-own-ear")
    assert (settings.llm.model, settings.asr.target, settings.asr.draft) == ("demo", "demo", "demo-draft")
    assert settings.asr.chosen_backend == "specasr" and settings.streaming.prompt_tokens == 0
    assert settings.streaming.final_redecode and settings.app.adaptive_endpointing
    # the demo chat model learned where a request ends: the end-of-turn decision uses its estimate
    from foresay.audio.turn_end import TurnEndDecision
    assert isinstance(settings.audio.turn_policy(settings.app.adaptive_endpointing), TurnEndDecision)


def test_held_out_requests_are_test_split_first_turns_in_held_out_voices():
    from foresay.engine.demo.speech import TEST_VARIANTS, utterances

    requests = held_out_requests(12)
    assert requests == held_out_requests(12)  # seeded
    heard_in_training = set(utterances("train", 10_000, seed=0))  # what the demo Whispers trained on
    assert not any(r.text in heard_in_training for r in requests)
    assert all(r.voice.voice.endswith(TEST_VARIANTS) for r in requests)
    assert all(r.reply for r in requests)


def test_spoken_held_out_requests_get_the_right_spoken_replies(tmp_path, capsys):
    """20 held-out requests, unpaced: 15 were heard and answered right when this was written (the
    misses: two chat-model errors, 'Rome' heard as 'Wellington' twice, a number misheard; see
    docs/benchmarks.md). The first request must come back right, the rest in the large majority."""
    report = tmp_path / "demo.json"
    assert main(["bench", "demo", "--requests", "20", "--json", str(report), "--keep", str(tmp_path / "wavs"),
                 "--set", "tts.engine=espeak"]) == 0
    results = json.loads(report.read_text())
    first = results["results"][0]
    assert (first["said"], first["heard"].strip()) == ("How many days are in June?", "How many days are in June?")
    assert first["replied"].strip() == first["expected"] == "June has 30 days."
    assert results["summary"]["heard_right"] >= 0.65 and results["summary"]["replied_right"] >= 0.65
    assert len(list((tmp_path / "wavs").glob("reply-*.wav"))) == 20
    assert "of 20 spoken held-out requests: answered right" in capsys.readouterr().err


def test_a_request_answered_right_is_not_a_miss_for_a_missing_word():
    from foresay.app.bench.demo import DemoRequest, DemoResult, result_lines
    from foresay.engine.demo.speech import VoiceSetting

    request = DemoRequest("Um, so on what continent is Brazil?", "Brazil is in South America.",
                          VoiceSetting("en-us-nyc+f4", 168, 52, 0.0))
    result = DemoResult(request, "Um, so what continent is Brazil?", "Brazil is in South America.", 1.5, None)
    assert result.replied_right and not result.heard_right
    assert result_lines(result).startswith("ok ") and "not word for word" in result_lines(result)
    wrong = DemoResult(request, request.text, "Brazil is in Europe.", 1.5, None)
    assert result_lines(wrong).startswith("MISS") and "expected 'Brazil is in South America.'" in result_lines(wrong)


def test_two_requests_are_two_turns_whatever_the_replies_latency(tmp_path):
    """The same request twice, 2.5 s apart, replayed faster than real time without waiting for
    the replies: the second begins before the first reply was heard (a slow machine, as far as
    the pipeline can tell). Each is a turn of its own, neither is merged into the other, and
    every word of both reaches a final transcript and the history."""
    import asyncio
    import random

    import numpy as np

    from foresay.app.assemble import build_pipeline
    from foresay.app.bench.demo import write_request
    from foresay.audio.files import FileSource, load_audio
    from foresay.audio.wav_sink import WavSink
    from foresay.engine.demo.speech import SAMPLE_RATE, write_wav
    from foresay.engine.events import FinalTranscript, SpeechStarted, TurnClosed, TurnResumed

    request = held_out_requests(1)[0]
    one, _ = load_audio(write_request(request, tmp_path / "one.wav", random.Random(0), lead_s=0.5))
    gap = np.zeros(int(2.5 * SAMPLE_RATE), np.float32)
    audio = write_wav(tmp_path / "two.wav", np.concatenate([one, gap, one]))
    settings = load_settings(profile="demo")
    seen = []

    async def run():
        pipeline = await build_pipeline(settings, FileSource(audio, realtime=False, pad_s=2.0),
                                        WavSink(tmp_path / "reply.wav", realtime=False), [seen.append])
        await pipeline.run()
        pipeline.close()

    asyncio.run(run())
    assert [e.turn_id for e in seen if isinstance(e, SpeechStarted)] == [1, 2]
    assert not any(isinstance(e, TurnResumed) for e in seen)
    finals = {e.turn_id: e.text.strip() for e in seen if isinstance(e, FinalTranscript)}
    assert finals == {1: request.text, 2: request.text}
    closed = {e.turn_id: e for e in seen if isinstance(e, TurnClosed)}
    assert closed[1].user_text == closed[2].user_text == request.text
    assert closed[2].reply_text


def piper_request(text: str, path, voice_folder):
    """`text` spoken by the Piper voice, at 16 kHz with half a second of silence around it."""
    import numpy as np
    from piper import PiperVoice

    from foresay.audio.resample import resample
    from foresay.engine.demo.speech import SAMPLE_RATE, write_wav

    chunks = list(PiperVoice.load(voice_folder / "en_US-joe-medium.onnx").synthesize(text))
    speech = resample(np.concatenate([c.audio_float_array for c in chunks]), chunks[0].sample_rate, SAMPLE_RATE)
    silence = np.zeros(SAMPLE_RATE // 2, dtype=np.float32)
    return write_wav(path, np.concatenate([silence, speech.astype(np.float32), silence]))


def test_a_real_voice_is_heard_word_for_word_by_the_demo_with_a_real_whisper(registry_model, tmp_path):
    """One of the examples the window offers, in Piper's joe voice (a real voice, unlike the
    espeak-ng ones the demo's own Whisper learned from), replayed paced through `--profile demo`:
    the real Whisper hears it word for word and the demo chat model answers it right."""
    registry_model("whisper-tiny.en")
    wav = piper_request("What currency does Canada use?", tmp_path / "request.wav",
                        registry_model("piper-en_US-joe-medium"))
    metrics = tmp_path / "turns.jsonl"
    assert main(["replay", str(wav), "--profile", "demo", "--metrics", str(metrics)]) == 0
    [turn] = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert (turn["user_text"], turn["reply_text"]) == ("What currency does Canada use?", "Canada uses the dollar.")


def test_smart_turn_on_hears_each_pause_beside_the_recognizer_and_the_answer_is_the_same(registry_model, tmp_path,
                                                                                      monkeypatch):
    """With `[audio.smart_turn] use = "on"` the pipeline gains the Smart Turn stage: each voice
    pause of the turn is judged on its own worker thread (an `AudioTurnCue` about the audio
    through that pause), the decision hears it, and the request is still heard and answered."""
    import asyncio
    import threading

    from foresay.app.commands import replay
    from foresay.audio.smart_turn import SmartTurnModel
    from foresay.engine.events import AudioTurnCue, FinalTranscript, TurnClosed, VoicePaused

    registry_model("whisper-tiny.en")
    registry_model("smart-turn-v3.2")
    wav = piper_request("What currency does Canada use?", tmp_path / "request.wav",
                        registry_model("piper-en_US-joe-medium"))
    (tmp_path / "config.toml").write_text("")
    settings = load_settings(tmp_path / "config.toml", "demo", ["audio.smart_turn.use=on", "tts.engine=espeak"])
    threads, predict = [], SmartTurnModel.predict

    def recorded(self, audio):
        threads.append(threading.current_thread().name)
        return predict(self, audio)

    monkeypatch.setattr(SmartTurnModel, "predict", recorded)
    seen = []
    asyncio.run(replay(settings, wav, None, [seen.append], realtime=False))
    pauses = {e.t for e in seen if isinstance(e, VoicePaused)}
    cues = [e for e in seen if isinstance(e, AudioTurnCue)]
    assert cues and all(c.turn_id == 1 and c.audio_until_t in pauses and 0 <= c.p_end_of_turn <= 1 for c in cues)
    assert threads and all(name.startswith("foresay-smart-turn") for name in threads)
    assert [e.text for e in seen if isinstance(e, FinalTranscript)] == ["What currency does Canada use?"]
    assert [e.reply_text for e in seen if isinstance(e, TurnClosed)] == ["Canada uses the dollar."]
