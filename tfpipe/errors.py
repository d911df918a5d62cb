"""Errors tfpipe raises for bad user input."""


class DataError(ValueError):
    """Input data tfpipe cannot use: the message names the file and the fix."""
