"""Foresay's audio stage: sound in and out, and when a user's turn starts and ends.

Everything the rest of the app uses is importable from here (see docs/audio.md):

- Blocks: `AudioBlock` (16 kHz mono float32 samples, `t` = monotonic capture time of the first
  sample), `SAMPLE_RATE`.
- Sources (async context managers and async iterators of blocks): `MicSource(MicConfig)`,
  `FileSource(path)`; `AudioSource` documents the interface.
- Devices: `list_devices()`, `resolve_device(spec, kind)`, `DeviceInfo`.
- VAD and endpointing: `make_vad(VadConfig)` (a quiet microphone raised first: `LevelledVad`),
  `Endpointer` (returns `SpeechStarted` / `TurnEnded`, and `VoicePaused` / `VoiceResumed` /
  `TurnResumed` / `EndOfTurnEstimate`), `EndpointerConfig`, `PushToTalkGate`, `Mode`, `Turn`.
- End-of-turn policies (strategy objects; `update(p_end_of_turn, turn_id, revision=,
  audio_until_t=)` from PredGen, `audio_cue(turn_id, p, audio_until_t)` from Smart Turn):
  `TurnEndDecision` + `TurnEndConfig`, `FixedHangover`, `AdaptiveHangover`,
  `AdaptiveHangoverConfig`, `HangoverPolicy`.
- Audio cue: `SmartTurnStage` (+ `SmartTurnConfig`, `SmartTurnModel`): Smart Turn v3.2's
  P(end of turn) from the turn's last 8 s, once per voice pause, as `AudioTurnCue`.
- Playback: `DeviceSink`, `WavSink`, `PlaybackConfig`, `PlaybackTicket`, `PlayedSpan`.
- Echo and barge-in: `make_echo_canceller`, `BargeInDetector` (returns `Interrupt` events),
  `BargeInConfig`, `EchoGateConfig`, `PlaybackReference`.
- Errors: `AudioError` and its subclasses, all `ForesayError`s.

PortAudio, libsndfile, onnxruntime and livekit load only when first used.
"""
from .bargein import BargeInConfig, BargeInDetector
from .blocks import SAMPLE_RATE, AudioBlock, AudioSource
from .capture import MicConfig, MicSource
from .devices import DeviceInfo, list_devices, resolve_device
from .echo import EchoCanceller, EchoGateConfig, make_echo_canceller, webrtc_aec_available
from .endpoint import Endpointer, EndpointerConfig, Mode, PushToTalkGate, Turn
from .errors import (AudioDeviceError, AudioDeviceLost, AudioError, AudioFileError,
                     DeviceUnavailable, NoAudioDevice, UnsupportedSampleRate)
from .files import FileSource, load_audio, read_audio_file
from .hangover import AdaptiveHangover, AdaptiveHangoverConfig, FixedHangover, HangoverPolicy
from .smart_turn import SmartTurnConfig, SmartTurnModel
from .smart_turn_stage import SmartTurnStage
from .turn_end import TurnEndConfig, TurnEndDecision, TurnEndView
from .playback import DeviceSink, PlaybackConfig, PlaybackTicket, PlayedSpan
from .wav_sink import WavSink
from .reference import PlaybackReference
from .vad import LevelledVad, SileroVad, Vad, VadConfig, WebRtcVad, make_vad

__all__ = [
    "SAMPLE_RATE", "AudioBlock", "AudioSource", "MicConfig", "MicSource", "FileSource",
    "load_audio", "read_audio_file", "DeviceInfo", "list_devices", "resolve_device",
    "Vad", "VadConfig", "WebRtcVad", "SileroVad", "LevelledVad", "make_vad",
    "Endpointer", "EndpointerConfig", "Mode", "PushToTalkGate", "Turn",
    "HangoverPolicy", "FixedHangover", "AdaptiveHangover", "AdaptiveHangoverConfig",
    "TurnEndDecision", "TurnEndConfig", "TurnEndView",
    "SmartTurnStage", "SmartTurnConfig", "SmartTurnModel",
    "DeviceSink", "WavSink", "PlaybackConfig", "PlaybackTicket", "PlayedSpan",
    "PlaybackReference", "EchoCanceller", "EchoGateConfig", "make_echo_canceller",
    "webrtc_aec_available", "BargeInConfig", "BargeInDetector",
    "AudioError", "AudioFileError", "AudioDeviceError", "NoAudioDevice", "DeviceUnavailable",
    "UnsupportedSampleRate", "AudioDeviceLost",
]
