"""Which encoder windows a clip is decoded in: Whisper at the cost of its audio, not of 30 seconds.

CTranslate2's Whisper encoder takes fewer than 3000 feature frames, and its cost falls with them
(tiny.en on 2 CPU cores: 106 ms for a 10 s window against 342 ms for 30 s). A window cut to the
clip's own length breaks Whisper (it loops: WER over 150%); one of a few fixed lengths, the clip
padded by silence as Whisper's own 30 s padding is, reads a request about as well as 30 s does.
But a shorter window loops more often (on two requests with 2.5 s of digital silence between
them, mostly), so a decode in a shorter window than the model's is checked (`looks_looped`: more
tokens than the audio can hold, or text that repeats itself, as Whisper's own compression-ratio
fallback judges) and a looped one is decoded again in the next window. Figures in
docs/benchmarks.md, "Whisper through CTranslate2: encoder window".
"""
from __future__ import annotations

import math
import zlib
from typing import Sequence

from foresay.engine.asr.errors import InvalidAsrConfig

BUCKETS_S: tuple[float, ...] = (10.0, 12.0, 15.0, 20.0)  # windows shorter than the model's own, tried in order
MAX_FILL = 0.5  # a shorter window is used for audio up to this share of it
# More than anyone says: at most 5.9 tokens a second in the pause decodes of the turn sets (digit
# strings, real and Piper speakers). A looped decode runs to the cap, so each token above it costs a
# decoder step (about 5.5 ms for tiny.en on one core) before the next window is tried.
TOKENS_PER_S = 8.0
TOKEN_SLACK = 8
MAX_COMPRESSION_RATIO = 2.4  # Whisper's own threshold for a repetitive transcript


def encoder_windows(audio_s: float, model_window_s: float, buckets: Sequence[float] = BUCKETS_S,
                    max_fill: float = MAX_FILL) -> tuple[float, ...]:
    """The windows (seconds) to decode `audio_s` of audio in, in the order to try them: those of
    `buckets` below the model's own window that the audio fills no more than `max_fill` of,
    shortest first, then the model's window; () when the audio is longer than the model's window
    (it is decoded in moving windows)."""
    if audio_s < 0 or model_window_s <= 0 or not 0 < max_fill <= 1:
        raise InvalidAsrConfig(f"encoder window: audio {audio_s} s and window {model_window_s} s must not be "
                               f"negative, max_fill {max_fill} must be in (0, 1]")
    if any(bucket <= 0 for bucket in buckets):
        raise InvalidAsrConfig(f"encoder window buckets must be positive, got {tuple(buckets)}")
    if audio_s > model_window_s:
        return ()
    shorter = sorted({float(b) for b in buckets if b < model_window_s and audio_s <= b * max_fill})
    return (*shorter, float(model_window_s))


def token_cap(audio_s: float) -> int:
    """The most tokens a transcript of `audio_s` of speech holds; a decode that reaches it loops."""
    return math.ceil(TOKENS_PER_S * audio_s) + TOKEN_SLACK


def looks_looped(text: str, tokens: int, audio_s: float) -> bool:
    """Does a decode of `audio_s` of audio read as a repetition loop?"""
    if tokens >= token_cap(audio_s):
        return True
    data = text.strip().encode("utf-8")
    return bool(data) and len(data) / len(zlib.compress(data)) > MAX_COMPRESSION_RATIO
