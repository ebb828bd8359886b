"""A scripted recognizer that takes time like a real model (ASR timing tests)."""
import time

from foresay.engine.asr.scripted import ScriptedBackend


class SlowScripted(ScriptedBackend):
    """The scripted recognizer, taking `seconds` per decode like a real model."""

    def __init__(self, utterance, seconds):
        super().__init__(utterance)
        self.seconds = seconds

    def transcribe(self, audio, forced=(), prompt=(), guess=()):
        time.sleep(self.seconds)
        return super().transcribe(audio, forced, prompt, guess)
