"""The packaged `foresay` executable: the same command line as the installed `foresay`."""
import multiprocessing
import sys

from foresay.app.cli import main

if __name__ == "__main__":
    multiprocessing.freeze_support()
    sys.exit(main())
