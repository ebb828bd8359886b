"""Servers for the `openai` backend's tests: a real llama.cpp server (llama-cpp-python) serving a
GGUF made from the demo chat model, and a misbehaving one for the error paths."""
from __future__ import annotations

import contextlib
import http.server
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

SERVED_NAME = "demo-chat"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def llama_cpp_server(gguf: Path, log_path: Path, startup_s: float = 120, alias: str | None = SERVED_NAME,
                     n_ctx: int = 2048):
    """llama-cpp-python's OpenAI-compatible server on a free loopback port; yields its base URL.
    Without an alias the server names the model by its file path."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
             *(["--model_alias", alias] if alias else []),
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", "1",
             "--n_threads_batch", "1", "--logits_all", "true", "--verbose", "false"],
            stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + startup_s
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"llama.cpp server exited ({proc.returncode}): "
                                       f"{log_path.read_text(errors='replace')[-2000:]}")
                try:
                    with urllib.request.urlopen(f"{url}/models", timeout=2) as answer:
                        if answer.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"llama.cpp server not up after {startup_s:.0f} s: "
                                       f"{log_path.read_text(errors='replace')[-2000:]}")
                time.sleep(0.3)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


@contextlib.contextmanager
def misbehaving_server(mode: str, models: tuple[str, ...] = (SERVED_NAME,)):
    """An HTTP server that lists `models`, then answers completions with `mode`: "500",
    "drop" (closes the connection without an answer) or "slow" (answers after 3 s)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _json(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._json(200, {"data": [{"id": name, "object": "model", "owned_by": "test"} for name in models]})

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if mode == "500":
                self._json(500, {"error": "model crashed"})
            elif mode == "drop":
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
            else:
                time.sleep(3)
                try:
                    self._json(200, {"choices": []})
                except OSError:  # the client gave up first, as it should
                    pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
