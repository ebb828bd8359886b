"""A target and a draft recognizer, measured as one: a clip decoded greedily or with SpecASR.

`foresay bench asr` and the demo evaluations compare decoding methods through this, whichever
family the pair is (Whisper, or an LLM-based recognizer such as Qwen3-ASR); every method's
tokens must equal the target's greedy tokens.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from foresay.engine.asr.backends import AsrBackend, DecodeLimits, SpecAsrBackend
from foresay.engine.asr.greedy import DecodeResult, greedy_decode, greedy_loop
from foresay.engine.asr.specasr import SpecConfig, speculative_decode, speculative_loop


class RecognizerPair(ABC):
    family: str

    @abstractmethod
    def decode(self, clip: np.ndarray, spec: SpecConfig | None, max_new_tokens: int) -> DecodeResult:
        """The target's greedy transcript of `clip` (`spec` None: its own greedy loop; else
        SpecASR with the draft), encoder passes included."""

    @abstractmethod
    def backend(self, spec: SpecConfig, limits: DecodeLimits) -> AsrBackend:
        """The SpecASR backend of this pair."""


@dataclass
class WhisperPair(RecognizerPair):
    target: object  # LoadedWhisper
    draft: object
    family: str = "whisper"

    def decode(self, clip, spec, max_new_tokens):
        target, prefix = self.target, self.target.vocab.decoder_prefix()
        encoded = target.encode(clip)
        if spec is None:
            return greedy_decode(target.model, encoded, prefix, target.rules, target.vocab.eot, max_new_tokens)
        return speculative_decode(target.model, self.draft.model, encoded, self.draft.encode(clip), prefix,
                                  target.rules, target.vocab.eot, spec, max_new_tokens)

    def backend(self, spec, limits):
        return SpecAsrBackend(self.target, self.draft, spec, limits)


@dataclass
class LlmPair(RecognizerPair):
    target: object  # LoadedLlmAsr
    draft: object
    family: str = "llm"

    def decode(self, clip, spec, max_new_tokens):
        from foresay.engine.asr.llm.models import encode_both

        target, prefix = self.target, self.target.layout.decoder_prefix()
        if spec is None:
            return greedy_loop(target.cursor(target.encode(clip)), prefix, target.rules, target.layout.end,
                               max_new_tokens)
        target_embeds, draft_embeds = encode_both(target, self.draft, clip)
        verifier, drafter = target.cursor(target_embeds), self.draft.cursor(draft_embeds, draft=True)
        return speculative_loop(verifier, drafter, prefix, target.rules, target.layout.end, spec, max_new_tokens)

    def backend(self, spec, limits):
        from foresay.engine.asr.llm.backends import LlmSpecAsrBackend

        return LlmSpecAsrBackend(self.target, self.draft, spec, limits)


def load_pair(target: str, draft: str, device: str = "cpu", attention: str = "sdpa",
              fixture_root: Path | None = None) -> RecognizerPair:
    """The pair named by `target` and `draft` (both Whisper, or both LLM-based)."""
    from foresay.engine.asr.errors import IncompatibleModels
    from foresay.engine.asr.llm.loading import is_llm_asr_name

    if is_llm_asr_name(target) != is_llm_asr_name(draft):
        raise IncompatibleModels(f"{target!r} and {draft!r} are of different families (Whisper and an "
                                 "LLM-based recognizer); a draft must share its target's vocabulary")
    if is_llm_asr_name(target):
        from foresay.engine.asr.llm.models import LlmAsrModelConfig, load_llm_asr

        loaded = [load_llm_asr(LlmAsrModelConfig(n, device=device, attention=attention, fixture_root=fixture_root))
                  for n in (target, draft)]
        loaded[0].layout.check_same(loaded[1].layout)
        return LlmPair(*loaded)
    from foresay.engine.asr.whisper.models import WhisperModelConfig, load_whisper

    loaded = [load_whisper(WhisperModelConfig(n, device=device, attention=attention, fixture_root=fixture_root))
              for n in (target, draft)]
    loaded[0].vocab.check_same(loaded[1].vocab)
    return WhisperPair(*loaded)
