"""Whisper: loading (transformers or CTranslate2 through faster-whisper), fixtures, vocabulary files."""
