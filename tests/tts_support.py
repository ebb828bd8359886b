"""Helpers for the TTS tests (no pytest-asyncio here: coroutine tests run through asyncio.run)."""
import asyncio
import functools


def run_async(test):
    """Runs an `async def` test in a fresh event loop."""
    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))
    return wrapper


async def collect(prepared):
    return [chunk async for chunk in prepared.stream()]
