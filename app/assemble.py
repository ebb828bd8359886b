"""Building a ready pipeline from the settings: models loaded (off the event loop), warmed up."""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from foresay.app.config import Settings
from foresay.app.demo_profile import assistant_intro, ear_words, own_ear_note
from foresay.app.downloads import download, download_models, offline_hint
from foresay.app.voice import choose_voice, fetch_voice
from foresay.engine.errors import ModelFileMissing, ModelUnavailable
from foresay.app.history import HistoryStore
from foresay.app.pipeline import Pipeline
from foresay.engine.events import Event, LoadProgress, StatusMessage

log = logging.getLogger(__name__)

LOAD_STEPS = ("language model", "speech recognizer", "voice", "warm-up")


def make_endpointer(settings: Settings, audio_cue: bool = False):
    """`audio_cue`: a Smart Turn stage answers at each voice pause."""
    from dataclasses import replace

    from foresay.audio.endpoint import Endpointer
    from foresay.audio.vad import make_vad

    audio = settings.audio
    config = replace(audio.endpointer, mode=settings.app.mode)
    return Endpointer(make_vad(audio.vad), config,
                      policy=audio.turn_policy(settings.app.adaptive_endpointing, audio_cue=audio_cue))


def load_smart_turn(settings: Settings):
    """The Smart Turn model, loaded and warmed, when the decision hears its cue; else None."""
    if not settings.audio.uses_audio_cue(settings.app.adaptive_endpointing, settings.asr.hears_people):
        return None
    from foresay.audio.smart_turn import SmartTurnModel

    return SmartTurnModel(settings.audio.smart_turn)


def ready_line(settings: Settings, chat: str, voice: str, audio_cue: bool = False) -> str:
    """The window's line once loaded: the profile, the chat model, the ear (and Smart Turn, when
    `audio_cue`: it hears how the user stops) and the voice; when the demo hears with its own
    Whisper for want of a real one, that too (also logged)."""
    ear = ear_words(settings.asr) + (" and Smart Turn" if audio_cue else "")
    line = f"ready: {settings.app.profile} profile, {chat}, hearing with {ear}; {voice}"
    note = own_ear_note(settings.app.profile, settings.asr)
    if note:
        log.warning(note)
        line += f"; {note}"
    return line


def share_cores(settings: Settings) -> None:
    """ASR and LLM both on the CPU: each worker thread gets half the cores, so a partial
    transcript's hop is not slowed by the other's thread pool fighting it for the same cores (a
    CTranslate2 Whisper takes its half itself: `asr.factory.default_cpu_threads`).

    numpy's BLAS keeps to one thread. Its products here are small (the log-mel's filter bank, for
    the recognizer and for Smart Turn), and after each one OpenBLAS's other threads spin for about
    0.1 s waiting for more: on 2 cores a Whisper decode then kept both busy, and the pause decode
    and Smart Turn, run side by side at every voice pause, each waited on the spinning thread
    (docs/benchmarks.md, "numpy's BLAS threads")."""
    import os

    import torch
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")
    if not settings.llm.threads and settings.llm.device in ("cpu", "auto") and not torch.cuda.is_available():
        torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))


async def build_pipeline(settings: Settings, source, sink, observers: list[Callable[[Event], None]] = (),
                         history: HistoryStore | None = None, wait_for_replies: bool = False) -> Pipeline:
    """Load every model named by `settings` (reporting progress to the observers), wire the
    stages around `source` and `sink`, and warm them up."""
    from foresay.app.turn_log import HistoryWriter, TurnLog
    from foresay.audio.bargein import BargeInDetector
    from foresay.audio.echo import make_echo_canceller
    from foresay.audio.listener import Listener
    from foresay.audio.smart_turn_stage import SmartTurnStage
    from foresay.engine.asr import StreamingAsr, build_backend
    from foresay.engine.compute_gate import ComputeGate
    from foresay.engine.llm.backend import load_llm
    from foresay.engine.predgen.strategies import prepare_continuation
    from foresay.engine.predgen.conversation import Conversation
    from foresay.engine.predgen.stage import PredGenStage
    from foresay.engine.predgen.verifiers import make_verifier
    from foresay.engine.stage import EventBus
    from foresay.engine.tts.factory import build_engine
    from foresay.engine.tts.speaker import Speaker

    def publish(event: Event) -> None:
        for observer in observers:
            observer(event)

    def tell(step: int, label: str) -> None:
        publish(LoadProgress(0, 0.0, "pipeline", label, step, len(LOAD_STEPS)))

    share_cores(settings)
    loop = asyncio.get_running_loop()  # first run: fetch hub models; progress comes from a worker
    try:
        await asyncio.to_thread(download_models, settings, lambda e: loop.call_soon_threadsafe(publish, e))
        tell(0, f"loading the language model {settings.llm.model}")
        lm = await asyncio.to_thread(load_llm, settings.llm)
        tell(1, f"loading the speech recognizer {settings.asr.target}")
        backend = await asyncio.to_thread(build_backend, settings.asr)
        smart_turn = await asyncio.to_thread(load_smart_turn, settings)
    except ModelFileMissing:
        raise   # a wrong path: the network and the offline profiles are beside the point
    except ModelUnavailable as exc:
        hint = offline_hint(profile=settings.app.profile)
        text = str(exc).replace(offline_hint(), "").strip()
        raise ModelUnavailable(f"{text} {hint}") from None
    prepare_continuation(settings.predgen.engine_config().continuation, lm)  # e.g. streams needs demo-streams
    choice = choose_voice(settings)
    if choice.download is not None:
        choice = await asyncio.to_thread(fetch_voice, settings, choice,
                                         lambda item: download(item, lambda e: loop.call_soon_threadsafe(publish, e)))
    if choice.fallback:
        log.warning("%s", choice.line)
        publish(StatusMessage(0, 0.0, choice.line, "warning"))
    tell(2, f"loading the {choice.line}")
    tts = build_engine(choice.config)

    conversation = Conversation(lm, reserve_tokens=settings.predgen.max_new_tokens)
    if history is not None and history.turns:
        conversation.load(history.messages())
    bus = EventBus(observers)
    gate = ComputeGate()  # ASR and LLM share the CPU cores or the GPU: an ASR decode goes first
    asr = StreamingAsr(backend, bus.emit, settings.streaming, gate=gate)
    bargein = BargeInDetector(sink.reference, settings.audio.bargein) if settings.audio.barge_in else None
    listener = Listener(make_endpointer(settings, audio_cue=smart_turn is not None), bus.emit, bargein=bargein,
                        echo=make_echo_canceller(sink.reference, settings.audio.echo_canceller),
                        adaptive_endpointing=settings.app.adaptive_endpointing)
    llm = PredGenStage(conversation, bus.emit, settings.predgen.engine_config(),
                       make_verifier(settings.predgen.verifier, lm), speculate=settings.predgen.enabled,
                       gate=gate)
    more = [HistoryWriter(history, bus.emit)] if history is not None else []
    if smart_turn is not None:
        more.append(SmartTurnStage(smart_turn, bus.emit))
    pipeline = Pipeline(bus=bus, source=source, listener=listener, asr=asr, llm=llm,
                        speaker=Speaker(tts, sink, bus.emit), sink=sink,
                        turn_log=TurnLog(bus.emit, paced=not wait_for_replies), more=more,
                        wait_for_replies=wait_for_replies)
    tell(3, "warming up")
    await pipeline.warmup()
    tell(4, "ready")
    publish(assistant_intro(settings.llm.model))
    publish(StatusMessage(0, 0.0, ready_line(settings, lm.description, choice.line, smart_turn is not None), "info"))
    return pipeline
