"""Where a chat model comes from: a built-in fixture, a shipped model, a folder, a GGUF file or a
hub id, resolved to a local source; its tokenizer with a usable chat template; and what the model
folder declares about itself (`foresay.json`)."""
from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING

from foresay.engine.llm.chat_format import check_template, read_chat_template
from foresay.engine.errors import ForesayError, ModelFileMissing, ModelUnavailable
from foresay.engine.llm.fixtures import FIXTURES, ensure_fixture
from foresay.engine.model_registry import SHIPPED_CHAT as DEMO_CHAT, shipped_model_dir as demo_model_dir

if TYPE_CHECKING:
    from foresay.engine.llm.config import LLMConfig


def resolve_model_path(config: LLMConfig) -> str:
    """The folder or hub id to load `config.model` from (a GGUF file's folder)."""
    return resolve_model_source(config)[0]


def resolve_model_source(config: LLMConfig, model: str | None = None) -> tuple[str, str | None]:
    """(source, gguf_file): a fixture name becomes its built folder, a demo model name its shipped
    folder, a `.gguf` file its folder and name; folders and hub ids pass through, checked."""
    model = model or config.model
    if model in FIXTURES:
        return str(ensure_fixture(model, config.seed)), None
    if model in DEMO_CHAT:
        return str(demo_model_dir(model, DEMO_CHAT)), None
    path = Path(model).expanduser()
    if model.endswith(".gguf"):
        if not path.is_file():
            raise ModelFileMissing(f"GGUF file {model!r} does not exist; check the path (llm.model)")
        return str(path.parent), path.name
    if path.exists():
        if config.gguf_file:
            if not (path / config.gguf_file).is_file():
                raise ModelFileMissing(f"{path} has no file {config.gguf_file!r}; check llm.gguf_file")
        elif not (path / "config.json").exists():
            ggufs = sorted(p.name for p in path.glob("*.gguf"))
            hint = (f"; it holds GGUF files ({', '.join(ggufs[:5])}): choose one with "
                    f"llm.gguf_file or pass the file itself") if ggufs else ""
            raise ModelUnavailable(f"{path} has no config.json: not a transformers model folder{hint}")
        return str(path), config.gguf_file
    if model.startswith((".", "/", "~")) or os.sep in model.strip("/").replace("/", "", 1):
        raise ModelFileMissing(f"model folder {model!r} does not exist; check the path (llm.model)")
    return model, config.gguf_file


def gguf_error(exc: Exception, source: str, gguf_file: str) -> ForesayError:
    text = str(exc)
    if isinstance(exc, ImportError) or "gguf" in text.lower() and "install" in text.lower():
        return ForesayError(f"reading {gguf_file} needs the `gguf` package: pip install gguf ({text})")
    if "not supported" in text or "architecture" in text:
        try:
            from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES as supported
        except ImportError:
            supported = []
        names = ", ".join(sorted(supported)) or "see transformers' GGUF documentation"
        return ModelUnavailable(f"{Path(source) / gguf_file}: {text.rstrip('.')}. transformers reads GGUF "
                                f"files of these architectures: {names}")
    if isinstance(exc, (struct.error, EOFError)):   # a file cut after its header (a download cut short)
        return ModelUnavailable(f"could not load {Path(source) / gguf_file}: the file ends before the data its "
                                f"header announces (cut short? download it again)")
    return ModelUnavailable(f"could not load {Path(source) / gguf_file}: {text}")


def load_tokenizer(config: LLMConfig, source: str, gguf_file: str | None, name: str):
    """The tokenizer of `source`, with `config.chat_template` when given; checked for a chat
    template that renders a conversation."""
    from transformers import AutoTokenizer

    kwargs = {"gguf_file": gguf_file} if gguf_file else {}
    tokenizer = AutoTokenizer.from_pretrained(source, revision=config.revision, **kwargs)
    if config.chat_template:
        tokenizer.chat_template = read_chat_template(config.chat_template)
    if not getattr(tokenizer, "chat_template", None):
        raise ForesayError(f"model {name!r} has no chat template (a base model?): give one with "
                           "llm.chat_template (a Jinja file or string) or --chat-template FILE")
    check_template(tokenizer, repr(name))
    return tokenizer


def model_offline_hint(model: str) -> str:
    fixtures = ", ".join([*FIXTURES, "demo"])
    return (f"model {model!r} is not in the local cache and the hub cannot be reached "
            f"(HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE', '0')}). Download it once with a network "
            f"connection (`huggingface-cli download {model}`), pass a local folder, or use a built-in "
            f"model ({fixtures}).")


MODEL_DECLARATION = "foresay.json"


def declared_history_turns(folder: str | Path) -> int | None:
    """The earlier turns a model folder declares it handles (`foresay.json`:
    {"max_history_turns": N}); None when it declares nothing (a hub model: its context limits it)."""
    path = Path(folder) / MODEL_DECLARATION
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text("utf-8")).get("max_history_turns")
    except (OSError, ValueError, AttributeError) as exc:
        raise ModelUnavailable(f"{path} is damaged ({exc}); it should hold "
                               f'{{"max_history_turns": N}}') from None
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ModelUnavailable(f"{path}: max_history_turns must be a whole number >= 0, not {value!r}")
    return value
