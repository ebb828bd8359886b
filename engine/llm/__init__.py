"""The LLM: settings (`config`), where a model comes from (`sources`, `fixtures`, `chat_format`),
the model in this process (`model`) or on a server (`server`), the KV cache interface (`cache`)
and its implementations (`dynamic_cache`, `static_cache`), greedy decoding (`decoding`).
`backend.load_llm` is the one place that builds a backend from the settings."""
