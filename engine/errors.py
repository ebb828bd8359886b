"""Errors Foresay reports to people: each says what went wrong and what to do about it."""


class ForesayError(Exception):
    """An error with a message meant for the user; the CLI prints it without a traceback."""


class ModelUnavailable(ForesayError):
    """A model could not be found locally and could not be downloaded."""


class ModelFileMissing(ModelUnavailable):
    """A model named by a local path (a folder, a .gguf file) is not there: a wrong path, not a
    download that failed (no network advice fits)."""


class PromptTooLong(ForesayError):
    """A prompt does not fit the model's context even after dropping all history."""


class EmptyPrompt(ForesayError):
    """A prompt with no words in it."""
