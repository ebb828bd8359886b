"""The packaged `foresay-gui` executable: the window, with no console (Windows, macOS app bundle)."""
import multiprocessing
import sys

from foresay.app.cli import main

if __name__ == "__main__":
    multiprocessing.freeze_support()
    sys.exit(main(sys.argv[1:]))
