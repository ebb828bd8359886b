"""The settings options every command that runs the pipeline takes: --profile, --config, --set."""
from __future__ import annotations

import argparse
from pathlib import Path

from foresay.app.config import Settings, load_settings


def add_settings_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", help="auto, gpu-24gb, gpu-16gb, gpu-8gb, cpu, tiny-random, demo ...")
    p.add_argument("--config", type=Path, help="config file (default: the platform's config folder)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one setting, e.g. --set llm.model=Qwen/Qwen2.5-3B-Instruct")


def settings_from(args) -> Settings:
    return load_settings(args.config, args.profile, args.set)
