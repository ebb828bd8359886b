"""A Hugging Face `tokenizers` tokenizer built from a tiktoken BPE rank file.

Whisper's English models use the GPT-2 byte-level BPE; openai-whisper ships it as a tiktoken
file (`base64(token bytes) rank` per line). The fixtures need the same tokenizer in the format
transformers and faster-whisper read (`tokenizer.json`), so it is rebuilt here: the vocabulary
maps byte strings to ranks, and the merges are every split of a token into two vocabulary
entries, ordered by the rank of the merged token. Merging by that order is exactly tiktoken's
rule (always merge the adjacent pair whose concatenation has the lowest rank).
"""
from __future__ import annotations

import base64
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

from foresay.engine.asr.errors import AsrError

# Whisper's language codes in token order (the English-only vocabulary has the first 99).
WHISPER_LANGUAGES = (
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no th "
    "ur hr bg lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw gl mr "
    "pa si km sn yo so af oc ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt "
    "haw ln ha ba jw su"
).split()
TIMESTAMP_COUNT = 1501  # <|0.00|> ... <|30.00|> in steps of 20 ms


def _byte_to_char() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used by byte-level BPE."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def read_ranks(path: Path) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    try:
        lines = Path(path).read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise AsrError(f"cannot read the BPE vocabulary {path}: {exc}") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
        except ValueError as exc:
            raise AsrError(f"{path}:{number}: not a tiktoken line ('base64 rank'): {line!r}") from exc
    return ranks


def whisper_special_tokens(n_languages: int = 99) -> list[str]:
    """The special tokens that follow the BPE vocabulary, in Whisper's id order."""
    return ["<|endoftext|>", "<|startoftranscript|>",
            *(f"<|{code}|>" for code in WHISPER_LANGUAGES[:n_languages]),
            "<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>",
            "<|notimestamps|>", *(f"<|{i * 0.02:.2f}|>" for i in range(TIMESTAMP_COUNT))]


def build_english_tokenizer(tiktoken_path: Path) -> Tokenizer:
    ranks = read_ranks(tiktoken_path)
    to_char = _byte_to_char()

    def text(token: bytes) -> str:
        return "".join(to_char[b] for b in token)

    vocab = {text(token): rank for token, rank in ranks.items()}
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise AsrError(f"{tiktoken_path}: ranks are not 0..{len(vocab) - 1} without gaps")
    merges: list[tuple[int, str, str]] = []
    for token, rank in ranks.items():
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            if left in ranks and right in ranks:
                merges.append((rank, text(left), text(right)))
    merges.sort()
    bpe = models.BPE(vocab=vocab, merges=[(a, b) for _, a, b in merges])
    tokenizer = Tokenizer(bpe)
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                  for t in whisper_special_tokens()])
    return tokenizer
