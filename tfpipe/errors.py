"""Errors tfpipe raises for bad user input, and how a message lists many bad files."""


class DataError(ValueError):
    """Input data tfpipe cannot use: the message names the file and the fix."""


def listed(problems, limit: int = 10) -> str:
    """The first `limit` problems, one per indented line, and how many more there are."""
    problems = [str(p) for p in problems]
    more = f"\n  ... and {len(problems) - limit} more" if len(problems) > limit else ""
    return "\n  " + "\n  ".join(problems[:limit]) + more
