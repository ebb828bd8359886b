import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from asr_support import asr_fixture_root, whisper_models  # noqa: E402,F401  (shared ASR fixtures)
