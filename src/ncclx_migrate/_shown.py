"""Text from other machines, made safe to print on a terminal.

Roll-up inputs, flight-recorder dumps and doctor reports come from other repositories, ranks and
hosts: a project name, a frame name or a hostname may hold an escape sequence that a terminal
obeys (OSC 52 writes the clipboard, OSC 0 sets the window title, CSI clears the screen, a lone
C1 byte U+009B is a CSI on some terminals).  Every such character is written out visibly, the way
Python's ``repr`` writes it (``ESC ] 52 ;`` -> ``\\x1b]52;``), so the sequence is never sent and
the operator sees that something was there.  This is the one place that decides which characters
are shown that way; every text renderer of another machine's text calls :func:`shown`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["JS_CONTROLS", "json_shown", "shown", "shown_lines", "shown_page"]

# Besides C0: DEL and the C1 controls, the line and paragraph separators, and the bidirectional
# controls (they reorder what follows on screen); and lone surrogates (a name that was not UTF-8).
_DEL_C1_LAYOUT = "\x7f-\x9f\u2028\u2029\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069"
_ANY = re.compile(f"[\x00-\x1f{_DEL_C1_LAYOUT}\ud800-\udfff]")
_BUT_NEWLINE = re.compile(f"[\x00-\x09\x0b-\x1f{_DEL_C1_LAYOUT}\ud800-\udfff]")
_JSON_RAW = re.compile(f"[{_DEL_C1_LAYOUT}]")  # what json.dumps(ensure_ascii=False) leaves raw
_BUT_LAYOUT = re.compile(f"[\x00-\x08\x0b-\x1f{_DEL_C1_LAYOUT}\ud800-\udfff]")  # a page keeps \n and \t
# The same class for a page's script, which shows the text its data holds (_htmlpage's esc()).
JS_CONTROLS = "[\\x00-\\x08\\x0b-\\x1f" + "".join(
    c if c == "-" else f"\\u{ord(c):04x}" for c in _DEL_C1_LAYOUT) + "]"
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    ch = m.group(0)
    code = ord(ch)
    return _NAMED.get(ch) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, Path)):
        return os.fsdecode(value)  # undecodable bytes become lone surrogates, shown as \udcNN
    return str(value)


def shown(value: object) -> str:
    """``value`` as one printable line: every control character (newlines too) escaped."""
    text = _text(value)
    return _ANY.sub(_escape, text) if _ANY.search(text) else text


def shown_lines(value: object) -> str:
    """``value`` with every control character escaped except the newlines between its lines:
    for a whole rendering whose lines this program made (its own fields already :func:`shown`)."""
    text = _text(value)
    return _BUT_NEWLINE.sub(_escape, text) if _BUT_NEWLINE.search(text) else text


def json_shown(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with the controls it leaves raw (DEL,
    C1, the separators and bidi controls) written as ``\\u`` escapes: the same data, safe on a
    terminal.  Outside strings JSON text is ASCII, so every such character is inside one."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text) if _JSON_RAW.search(text) else text


def shown_page(value: object) -> str:
    """``value`` for an HTML page: every control character escaped but newlines and tabs (a
    page lays those out); html.escape comes after."""
    text = _text(value)
    return _BUT_LAYOUT.sub(_escape, text) if _BUT_LAYOUT.search(text) else text
