"""The settings options every command that runs the pipeline takes: --profile, --config, --set."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from foresay.app.config import Settings, default_config_path, load_settings, read_config_file


def add_settings_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", help="auto, gpu-24gb, gpu-16gb, gpu-8gb, cpu, tiny-random, demo ...")
    p.add_argument("--config", type=Path, help="config file (default: the platform's config folder)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one setting, e.g. --set llm.model=Qwen/Qwen2.5-3B-Instruct")


def settings_from(args) -> Settings:
    """The settings `args` choose; says on stderr when --profile runs another profile than the
    configured one (nobody then wonders why the file's choice does not hold)."""
    settings = load_settings(args.config, args.profile, args.set)
    if args.profile:
        path = args.config or default_config_path()
        configured = (read_config_file(path).get("app", {}).get("profile", "auto")
                      if Path(path).is_file() else "auto")
        if configured not in (args.profile, settings.app.profile):
            print(f"foresay: running the {settings.app.profile!r} profile (--profile); {path} chooses "
                  f"{configured!r}", file=sys.stderr)
    return settings
