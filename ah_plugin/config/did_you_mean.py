"""The closest known word to a misspelled one (a variable's name or value, a tool's name), for a
"did you mean" in the message that names it. Standard library only."""

from __future__ import annotations


def closest(word: str, known, cutoff: float = 0.6) -> str | None:
    """The known word most like ``word`` (case ignored), or None when none is close."""
    import difflib  # only when something is misspelled

    by_lower = {str(k).lower(): str(k) for k in known}
    found = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=cutoff)
    return by_lower[found[0]] if found else None


def hint(word: str, known) -> str:
    """``" (did you mean 'X'?)"`` for the closest known word, else ``""``."""
    match = closest(word, known)
    return f" (did you mean {match!r}?)" if match else ""
