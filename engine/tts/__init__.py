"""Text-to-speech engines that prepare audio ahead of time, hold it, and release it at once.

Build one with `build_engine(EspeakConfig(...))`, `PiperConfig(...)` or `ZonosConfig(...)`; then
`await engine.warmup()`, `prepared = engine.prepare(text)`, `async for chunk in prepared.stream()`,
`prepared.cancel()`."""
