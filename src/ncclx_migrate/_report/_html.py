"""``ncclx report --html``: the roll-up as one self-contained page."""

from __future__ import annotations

from typing import Any

from .._htmlpage import esc, page
from ._text import render_text

__all__ = ["render_page"]


def render_page(doc: dict[str, Any]) -> str:
    body = f"<pre>{esc(render_text(doc))}</pre>"
    return page("ncclx report", esc(doc["generated"]), body, {}, 'document.body.dataset.rendered="1";')
