"""The packaged `foresay-gui` executable: the window, with no console (Windows, macOS app bundle)."""
import multiprocessing
import os
import sys

from foresay.app.cli import main

if __name__ == "__main__":
    multiprocessing.freeze_support()
    # A windowed executable has no console: sys.stdout/stderr are None there, and a library that
    # prints (a warning, a progress bar) would crash the app.
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))
    sys.exit(main(sys.argv[1:]))
