"""The `foresay` command line: one parser, subcommands registered by the modules that own them."""
from __future__ import annotations

import argparse
import sys
import warnings

from foresay.app import bench, commands as pipeline_commands, doctor, registry_cli
from foresay.app.version import version_line
from foresay.audio import cli as audio_cli
from foresay.engine.errors import ForesayError


class _VersionAction(argparse.Action):
    """--version, worked out only when asked for (not on every command)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="show the version and git revision and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="foresay", description="A local voice assistant that answers while you speak.")
    parser.add_argument("--version", action=_VersionAction)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    doctor.register(commands)
    bench.register(commands)
    audio_cli.register(commands)
    pipeline_commands.register(commands)
    registry_cli.register(commands)
    return parser


def with_command(argv: list[str]) -> list[str]:
    """`argv` with `run` put first when it names no command, so `foresay --profile demo` opens the
    window with that profile (the top-level parser itself knows only --help and --version)."""
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        return ["run", *argv]
    return argv


def main(argv: list[str] | None = None) -> int:
    # transformers 5.2x warns at each model's first pass that `past_key_values` is to be `cache`
    # (a name older releases do not take); the dependency stays below 5.40, which drops it, and a
    # user can do nothing about the warning
    warnings.filterwarnings("ignore", message="`past_key_values` is deprecated", category=FutureWarning)
    parser = build_parser()
    args = parser.parse_args(with_command(list(sys.argv[1:] if argv is None else argv)))
    try:
        return int(args.func(args) or 0)
    except ForesayError as exc:
        print(f"foresay: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
