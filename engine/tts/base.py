"""What every TTS engine offers: prepare / warmup / sample_rate, a bound on held preparations,
and a running estimate of its real-time factor for the hold policy."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from foresay.engine.tts.errors import InvalidTtsConfig, SynthesisFailed
from foresay.engine.tts.hold import HoldPolicy, UnderrunFreeHold
from foresay.engine.tts.pool import HeldPreparations
from foresay.engine.tts.prepared import Prepared, SynthesisJob
from foresay.engine.tts.segments import Segment, SegmentSplitter
from foresay.engine.tts.timing import SynthesisTiming


@dataclass(frozen=True)
class PreparationOptions:
    """How engines prepare ahead; shared by every engine's config."""
    hold: HoldPolicy = field(default_factory=UnderrunFreeHold)  # how much audio before holding
    max_held: int = 3            # preparations held at once; a new one cancels the oldest beyond it
    splitter: SegmentSplitter = field(default_factory=SegmentSplitter)  # text -> segments
    rtf_smoothing: float = 0.3   # weight of the newest preparation in the running RTF estimate
    initial_rtf: float = 1.0     # RTF assumed before warmup measured one

    def __post_init__(self) -> None:
        if self.max_held < 1:
            raise InvalidTtsConfig(f"max_held must be at least 1, got {self.max_held}")
        if not 0 < self.rtf_smoothing <= 1:
            raise InvalidTtsConfig(f"rtf_smoothing must be in (0, 1], got {self.rtf_smoothing}")
        if not self.initial_rtf > 0:
            raise InvalidTtsConfig(f"initial_rtf must be positive, got {self.initial_rtf}")
        if not callable(getattr(self.hold, "target_seconds", None)):
            raise InvalidTtsConfig(f"hold must be a HoldPolicy (FixedHold, UnderrunFreeHold), got {self.hold!r}")


class TtsEngine(ABC):
    """Subclasses turn segments and a validated voice into a SynthesisJob."""

    name = "tts"
    warmup_text = "Hello, I am ready."

    def __init__(self, options: PreparationOptions) -> None:
        self._options = options
        self._held = HeldPreparations(options.max_held)
        self._rtf = options.initial_rtf

    @property
    @abstractmethod
    def sample_rate(self) -> int:
        """Samples per second of the chunks this engine makes (for its default voice)."""

    @abstractmethod
    def _resolve_voice(self, voice):
        """The engine's voice options, validated; None means the config's default voice."""

    @abstractmethod
    def _make_job(self, segments: tuple[Segment, ...], voice) -> SynthesisJob:
        """The synthesis of `segments` with `voice`, to run in a worker thread."""

    async def _load(self) -> None:
        """Loads what the engine needs (off the event loop); called by warmup()."""

    @property
    def rtf_estimate(self) -> float:
        """Running real-time factor: warmup's measurement, then smoothed over preparations."""
        return self._rtf

    def held(self) -> list[Prepared]:
        return self._held.held()

    def prepare(self, text: str, voice=None, *, turn_id: int = 0) -> Prepared:
        """Starts synthesizing `text` in the background until the hold policy's amount of audio is
        ready, then holds. Must be called from a running event loop."""
        segments = self._options.splitter.split(text)
        job = self._make_job(segments, self._resolve_voice(voice))
        target = self._options.hold.target_seconds(text, self._rtf)
        prepared = Prepared(text, job, target, turn_id=turn_id, engine_name=self.name,
                            on_finished=self._learn)
        self._held.add(prepared)
        return prepared

    async def warmup(self) -> SynthesisTiming:
        """Loads, then synthesizes a short sentence end to end (compiling what compiles), and
        measures it; call before the app says ready."""
        await self._load()
        prepared = self.prepare(self.warmup_text)
        async for _ in prepared.stream():
            pass
        await prepared.wait_done()
        timing = prepared.timing()
        if timing.rtf is None:
            raise SynthesisFailed(f"{self.name} produced no audio while warming up")
        self._rtf = timing.rtf
        return timing

    def close(self) -> None:
        """Cancels every held preparation."""
        self._held.cancel_all()

    def _learn(self, timing: SynthesisTiming) -> None:
        if timing.rtf is not None:
            a = self._options.rtf_smoothing
            self._rtf = (1 - a) * self._rtf + a * timing.rtf
