"""First-run model downloads from the Hugging Face hub, reported as LoadProgress events.

Before the loaders run, `download_models` fetches every hub model the settings name into the hub
cache, asking for the same files the loader will ask for, so the loader's own look-up is then a
cache hit. huggingface_hub reports through tqdm progress bars; `DownloadProgress` turns them
into `LoadProgress(component="download of <repo>", done=bytes, total=bytes)` events (files when
the hub client gives no byte counts). Local folders and built-in fixtures are never downloaded.
Zonos weights are left to Zonos' own loader (its model choice depends on the GPU found there).
"""
from __future__ import annotations

import io
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from foresay.app.config import OFFLINE_PROFILES, PROFILES, Settings, default_config_path
from foresay.engine.errors import ModelUnavailable
from foresay.engine.events import LoadProgress
from foresay.engine.model_registry import SPEECH_FILES

# The files each loader reads. WHISPER_FILES are the speech recognizers' (Whisper and Qwen3-ASR in
# transformers' layout, `engine.model_registry.SPEECH_FILES`), and CT2_WHISPER_FILES must match
# faster_whisper.utils.download_model (tests check it).
LLM_FILES = ("*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "*.jinja")
TOKENIZER_FILES = ("*.json", "*.txt", "*.model", "*.tiktoken", "*.jinja")
WHISPER_FILES = SPEECH_FILES
CT2_WHISPER_FILES = ("config.json", "preprocessor_config.json", "model.bin", "tokenizer.json", "vocabulary.*")


@dataclass(frozen=True)
class HubDownload:
    """repo_id: the hub repository ("owner/name"). files: glob patterns of the files to fetch.
    revision: branch, tag or commit (None: the default branch). what: the model's role, for messages."""
    repo_id: str
    files: tuple[str, ...]
    revision: str | None = None
    what: str = "model"

    @property
    def component(self) -> str:
        return f"download of {self.repo_id}"


def is_hub_id(name: str) -> bool:
    """"owner/name" that is not a local path (fixture names and folders have no hub id)."""
    if not name or name.startswith((".", "/", "~")) or Path(name).expanduser().exists():
        return False
    parts = name.split("/")
    return len(parts) == 2 and all(parts)


def faster_whisper_repo(name: str) -> str | None:
    """faster-whisper's short names ("base.en") map to their hub repositories."""
    if is_hub_id(name):
        return name
    try:
        from faster_whisper.utils import _MODELS  # the library's own name table
    except ImportError:
        return None
    return _MODELS.get(name)


def hub_downloads(settings: Settings) -> list[HubDownload]:
    """The hub models `settings` will load, in loading order."""
    out = []
    llm = settings.llm
    if llm.backend == "openai":  # a served model's name, not ours to fetch; its tokenizer may be
        if llm.tokenizer and is_hub_id(llm.tokenizer):
            out.append(HubDownload(llm.tokenizer, TOKENIZER_FILES, None, "language model's tokenizer"))
    elif is_hub_id(llm.model):
        out.append(HubDownload(llm.model, LLM_FILES, llm.revision, "language model"))
    asr = settings.asr
    if asr.chosen_backend == "faster-whisper":
        from foresay.engine.registry_models import fetched_whisper
        repo = None if fetched_whisper(asr.target) is not None else faster_whisper_repo(asr.target)
        if repo:
            out.append(HubDownload(repo, CT2_WHISPER_FILES, None, "speech recognizer"))
    else:
        names = [asr.target] + ([asr.draft] if asr.uses_draft and asr.draft else [])
        out += [HubDownload(n, WHISPER_FILES, None, "speech recognizer") for n in names if is_hub_id(n)]
    return out


def offline_profiles() -> list[str]:
    """The profiles that need no download (config.OFFLINE_PROFILES, as this build has them)."""
    return [p for p in OFFLINE_PROFILES if p in PROFILES]


_OFFLINE_STATES = {"demo": "which knows a toy domain", "tiny-random": "whose random models only babble"}


def offline_state(profile: str) -> str:
    """The window's lasting state line while an offline profile stands in for the chosen one."""
    return f"offline: the {profile} profile, {_OFFLINE_STATES.get(profile, 'which needs no download')}"


def offline_hint(window: bool = False, profile: str | None = None) -> str:
    """What to do when a model cannot be had: command-line advice, or the window's. On an
    offline profile (`profile`) the model missing is one a setting added to it: the advice says
    so instead of offering the profile already in use."""
    names = offline_profiles()
    if profile in names:
        where = "File \u25b8 Settings" if window else f"the --set options and {default_config_path()}"
        return (f"The offline {profile!r} profile does not ship this model, so a setting names it: "
                f"connect to the internet and try again, or remove that setting ({where}).")
    if not names:
        return "Connect to the internet and try again."
    listed = " or ".join(repr(n) for n in names)
    how = ("choose it in File \u25b8 Settings" if window else
           f"add `--profile {names[0]}` to the command, or set `profile = \"{names[0]}\"` under [app] in "
           f"{default_config_path()}")
    return f"Connect to the internet and try again, or use an offline profile ({listed}): {how}."


class DownloadProgress:
    """Collects huggingface_hub's progress bars for one download and emits LoadProgress events,
    at most one per `min_interval_s` (and always the last). Thread-safe: the hub client updates
    its bars from several download threads."""

    def __init__(self, download: HubDownload, emit: Callable[[LoadProgress], None],
                 min_interval_s: float = 0.1, clock: Callable[[], float] = time.monotonic):
        self.download = download
        self.emit = emit
        self.min_interval_s = min_interval_s
        self.clock = clock
        self._bars: dict[int, tuple[str, float, float]] = {}  # id(bar) -> (unit, n, total)
        self._lock = threading.Lock()
        self._last_emit = float("-inf")

    def bar_class(self):
        """A tqdm class that reports to this object and prints nothing (a windowed app has no
        console: its sys.stderr may be None)."""
        from tqdm.auto import tqdm

        progress = self

        class _Bar(tqdm):
            def __init__(self, *args, **kwargs):
                kwargs["file"] = io.StringIO()
                kwargs["disable"] = False  # a disabled tqdm stops counting
                kwargs.pop("name", None)  # huggingface_hub's own bar option
                super().__init__(*args, **kwargs)
                progress._track(self)

            def update(self, n=1):
                result = super().update(n)
                progress._track(self)
                return result

            def refresh(self, *args, **kwargs):
                progress._track(self)

            def display(self, *args, **kwargs):
                return None

        return _Bar

    def _track(self, bar) -> None:
        with self._lock:
            self._bars[id(bar)] = (bar.unit, float(bar.n), float(bar.total or 0))
            done, total = self._progress()
            now = self.clock()
            if now - self._last_emit < self.min_interval_s and done != total:
                return
            self._last_emit = now
            self.report(done, total)  # under the lock: events leave in order

    def _progress(self) -> tuple[float, float | None]:
        """Bytes when any bar counts bytes (the most advanced one), else files."""
        bars = [b for b in self._bars.values() if b[2] > 0]
        byte_bars = [b for b in bars if b[0] == "B"]
        chosen = byte_bars or bars
        if not chosen:
            return 0.0, None
        unit, n, total = max(chosen, key=lambda b: (b[2], min(b[1], b[2])))
        return min(n, total), total

    def report(self, done: float, total: float | None) -> None:
        d = self.download
        if total and self._bars_in_bytes():
            label = f"{d.what}, {done / 1e9:.2f} of {total / 1e9:.2f} GB"
        elif total:
            label = f"{d.what}, file {int(done)} of {int(total)}"
        else:
            label = d.what
        self.emit(LoadProgress(0, self.clock(), d.component, label, done, total))

    def _bars_in_bytes(self) -> bool:
        return any(b[0] == "B" and b[2] > 0 for b in self._bars.values())

    def finish(self) -> None:
        """The download is complete: the component leaves the loading list."""
        with self._lock:
            total = self._progress()[1] or 1.0
            self.report(total, total)


def download(item: HubDownload, emit: Callable[[LoadProgress], None], snapshot_download=None) -> Path:
    """Fetch one model into the hub cache (a cache hit when it is there); ModelUnavailable if not."""
    if snapshot_download is None:
        from huggingface_hub import snapshot_download
    progress = DownloadProgress(item, emit)
    progress.report(0.0, None)
    try:
        folder = snapshot_download(item.repo_id, revision=item.revision, allow_patterns=list(item.files),
                                   tqdm_class=progress.bar_class())
    except Exception as exc:  # the hub client raises many kinds (offline, not found, gated, HTTP, disk)
        progress.finish()
        raise ModelUnavailable(
            f"the {item.what} {item.repo_id!r} is not downloaded yet and cannot be downloaded now: "
            f"{download_failure(exc)}. " + offline_hint()) from exc
    progress.finish()
    return Path(folder)


def hub_unreachable(timeout_s: float = 3.0) -> str | None:
    """Why the model hub cannot be reached now (in plain words), or None when it can."""
    from urllib.parse import urlsplit

    parts = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = parts.hostname or "huggingface.co", parts.port or (80 if parts.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except socket.gaierror:
        return f"no network connection ({host} cannot be looked up)"
    except OSError as exc:
        return f"{host} cannot be reached ({exc.strerror or exc})"
    return None


def download_failure(exc: BaseException) -> str:
    """Why a download failed, in plain words: for a network failure its innermost cause (the hub
    client wraps it several times), else the hub's own first line (not found, gated, disk)."""
    root, seen = exc, {id(exc)}
    while (nxt := root.__cause__ or root.__context__) is not None and id(nxt) not in seen:
        seen.add(id(nxt))
        root = nxt
    if isinstance(root, socket.gaierror):
        return "no network connection (the hub's address cannot be looked up)"
    if isinstance(root, (ConnectionError, TimeoutError)):
        return f"the hub cannot be reached: {_first_line(root)}"
    return _first_line(exc)


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__).rstrip(".")


def download_models(settings: Settings, emit: Callable[[LoadProgress], None]) -> list[Path]:
    """Fetch every hub model `settings` names (blocking: call it off the event loop)."""
    return [download(item, emit) for item in hub_downloads(settings)]
