"""`WavSink`: the playback interface (`playback.PlaybackSink`) writing replies to a WAV file."""
from __future__ import annotations

import asyncio
import logging
import time

from .errors import AudioFileError
from .playback import PlaybackConfig, PlaybackSink

log = logging.getLogger(__name__)


class WavSink(PlaybackSink):
    """Writes replies to a WAV file (16-bit PCM), for headless runs and replay.

    realtime=True behaves like a speaker: blocks are written at their real-time pace, with
    silence between replies, so output times, flush() and the echo reference mean the same as
    with a device. realtime=False writes the replies back to back as fast as they come; output
    times are the moments they were written.
    """

    def __init__(self, path, sample_rate: int = 24_000, *, realtime: bool = True,
                 config: PlaybackConfig | None = None):
        super().__init__(config or PlaybackConfig())
        self.path, self.sample_rate = str(path), int(sample_rate)
        self.realtime = self._continuous = realtime
        self._file, self._task = None, None
        self.samples_written = 0
        self.failure: AudioFileError | None = None   # the file stopped taking audio (a full disk)

    async def start(self) -> None:
        if self._file is not None:
            return
        import soundfile as sf

        try:
            self._file = sf.SoundFile(self.path, "w", samplerate=self.sample_rate, channels=1,
                                      subtype="PCM_16", format="WAV")
        except (sf.LibsndfileError, OSError, RuntimeError) as exc:
            raise AudioFileError(f"cannot write {self.path}: {exc}") from exc
        self._setup(self.sample_rate)
        self._task = asyncio.get_running_loop().create_task(self._pump())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        if self._core is not None:
            self.flush()
        if self._file is not None:
            try:
                self._file.close()
            except Exception as exc:   # the header's last update on a full disk
                self.failure = self.failure or self._cannot_write(exc)
            self._file = None
        if self.failure is not None:
            raise self.failure

    def _cannot_write(self, exc: Exception) -> AudioFileError:
        from .files import write_failure
        return AudioFileError(f"cannot write {self.path}: {write_failure(self.path, exc)}; only the first "
                              f"{self.samples_written / self.sample_rate:.1f} s of the reply audio were written")

    def _write(self, out) -> None:
        """Into the file; once that fails the audio goes on being played out (into nothing),
        so the conversation keeps its pace and ends, and close() raises the failure."""
        if self.failure is not None:
            return
        try:
            self._file.write(out)
            self.samples_written += len(out)
        except Exception as exc:   # soundfile says LibsndfileError("System error."), or OSError
            self.failure = self._cannot_write(exc)
            log.warning("%s", self.failure)

    async def _pump(self) -> None:
        n = self.sample_rate * self.config.block_ms // 1000
        block_s = n / self.sample_rate
        t_next = time.monotonic()
        while True:
            if self.realtime:
                out, segments, n0 = self._core.read(n)
                self._write(out)
                self._played(n0, segments, t_next)
                t_next += block_s
                await asyncio.sleep(max(0.0, t_next - time.monotonic()))
            elif self._core.has_playable():
                out, segments, n0 = self._core.read(n)
                filled = sum(count for _, _, count, _ in segments)
                self._write(out[:filled])
                self._played(n0, segments, time.monotonic())
                await asyncio.sleep(0)
            else:
                self._wake.clear()
                await self._wake.wait()
