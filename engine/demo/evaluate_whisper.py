"""Word error rate of a Whisper on demo speech, decoded by Foresay's own greedy loop."""
from __future__ import annotations

from dataclasses import dataclass, field

from foresay.engine.demo.speech import SpeechSet
from foresay.engine.sentences import ends_sentence
from foresay.engine.sequences import words


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1]


@dataclass
class WerScore:
    errors: int = 0
    words: int = 0
    clips: int = 0
    exact: int = 0  # clips transcribed word for word
    completed: int = 0  # clips cut mid-sentence whose transcript ends a sentence (reads as a whole request)
    worst: list[tuple[str, str]] = field(default_factory=list)  # (reference, hypothesis)

    @property
    def wer(self) -> float:
        return self.errors / self.words if self.words else 0.0


def evaluate_wer(backend, speech: SpeechSet, keep_worst: int = 10) -> WerScore:
    """WER of `backend` (an `AsrBackend`) over the clips of `speech`."""
    score = WerScore()
    misses = []
    for text, clip in zip(speech.texts, speech.audio):
        hypothesis = backend.text.decode(backend.transcribe(clip).tokens)
        ref, hyp = words(text), words(hypothesis)
        errors = edit_distance(ref, hyp)
        score.errors += errors
        score.words += len(ref)
        score.clips += 1
        score.exact += errors == 0
        score.completed += not ends_sentence(text) and ends_sentence(hypothesis)
        if errors:
            misses.append((errors, text, hypothesis.strip()))
    score.worst = [(t, h) for _, t, h in sorted(misses, key=lambda m: -m[0])[:keep_worst]]
    return score
