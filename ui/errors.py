"""Errors of the UI layer, meant for people (see foresay.engine.errors)."""
from foresay.engine.errors import ForesayError


class InvalidUiConfig(ForesayError):
    """A window setting or a settings-dialog choice is out of range or inconsistent."""
