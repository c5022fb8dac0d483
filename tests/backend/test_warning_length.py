"""Every LegacyNCCLWarning message fits a line: what happened and what to do within 120
characters; the why and the evidence are one command away (`ncclx explain CODE`)."""

from __future__ import annotations

import pytest

from ncclx_migrate._envwarnings import InstalledTorch, env_message, toggle_message
from ncclx_migrate._torch.envvars import ENV_VARS, EnvKind
from ncclx_migrate._warnings import MAX_MESSAGE, warning_text
from ncclx_migrate.backend import _legacy, _select

_EPS = frozenset({"gloo", "nccl", "nccl-legacy", "nccl2"})
TORCHES = [None, InstalledTorch((2, 13), frozenset()), InstalledTorch((2, 14), _EPS),
           InstalledTorch((2, 15), _EPS), InstalledTorch((2, 16), _EPS - {"nccl-legacy"})]


def _messages(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    out = []
    for torch in TORCHES:
        for value in ("0", "1", "false", "a value someone pasted from a long wiki page"):
            message = toggle_message(value, torch)
            if message is not None:
                out.append(warning_text("NCX101", message))
    for row in ENV_VARS:
        if row.kind not in (EnvKind.TOGGLE, EnvKind.CURRENT):
            out.append(warning_text(row.py_code, env_message(row)))
    out.append(warning_text("NCX101", _select.OVERRIDDEN))
    for require in ("", "yes", "a much longer value than anyone should type"):
        out.append(warning_text("NCX103", _select.no_nccl2_message(2, 13, require)))
    for version in ((2, 13), (2, 15), (2, 16)):
        monkeypatch.setattr(_legacy, "torch_version", lambda v=version: v)
        out += [warning_text("NCX103", _legacy._message(kind)) for kind in ("torch", "legacy", "gone")]
    return out


def test_every_warning_message_is_one_short_line(monkeypatch: pytest.MonkeyPatch) -> None:
    messages = _messages(monkeypatch)
    assert len(messages) > 20
    for text in messages:
        assert len(text) <= MAX_MESSAGE and "\n" not in text, (len(text), text)
        assert text.startswith("[NCX") and text.endswith(f" (`ncclx explain {text[1:7]}`)")


def test_a_users_value_is_clipped_not_dropped() -> None:
    message = toggle_message("a value someone pasted from a long wiki page", None)
    assert message is not None and "'a value s...'" in message
