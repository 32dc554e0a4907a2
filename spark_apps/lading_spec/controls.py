"""Control characters from tenants' text are shown escaped, never sent to a terminal.

An error a tenant's data or ``raise_error`` produced reaches ``status.response.error``,
conditions, Events and the operator's log, and from there ``kubectl describe`` and a
log viewer print it on somebody's terminal. An ESC (``\\x1b``) there starts a sequence
the terminal runs: colours, cursor moves that overwrite what was printed, OSC 8 links,
OSC 52 writes to the clipboard, a window title; BEL rings; CR returns to the start of
the line and overprints it; bidirectional overrides (U+202E) reorder what is read.

:func:`escape_controls` writes each of them as a visible escape: C0 (U+0000-U+001F),
DEL and C1 (U+007F-U+009F) as ``\\xHH``; the line and paragraph separators (U+2028,
U+2029) and the bidirectional embeddings, overrides and isolates (U+202A-U+202E,
U+2066-U+2069) as ``\\uHHHH``. Newline and tab are kept where the field is multi-line
(``status.response.error``, condition messages: what went wrong often spans a stack
trace) and escaped where a line is one record (Events, log lines): ``keep``.
"""

from __future__ import annotations

import re

MULTI_LINE = "\n\t"
"""What a multi-line field keeps (status.response.error, condition messages)."""
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str, keep: str = "") -> str:
    """``text`` with every control character (see the module doc) but those in ``keep`` escaped."""
    if not keep:
        return _CONTROLS.sub(_escaped, text)
    return _CONTROLS.sub(lambda m: m.group(0) if m.group(0) in keep else _escaped(m), text)


def has_controls(text: str) -> bool:
    """Whether ``text`` holds a character :func:`escape_controls` escapes (newline and tab included)."""
    return _CONTROLS.search(text) is not None
