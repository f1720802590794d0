"""Client text as the server's log lines show it: what a client controls (its name, what its bad
message held) never starts a line of its own or moves the terminal's cursor.

    logger.warning("rlx: %s ended: %s", conn, escaped(reason))   # "evil\nparl: ERROR: x" -> one line
"""

from __future__ import annotations


def escaped(text: str) -> str:
    """``text`` with every character that is not printable (newlines, carriage returns, escape
    sequences, Unicode line separators and format characters) written as its Python escape
    (``\\n``, ``\\x1b``, ``\\u2028``); printable text is returned as it is."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
