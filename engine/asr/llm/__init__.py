"""LLM-based recognizers (Qwen3-ASR: an audio encoder before a causal LM decoder): loading,
fixtures, a lean decoder pass and its cursor, and the backend over the shared SpecASR."""
