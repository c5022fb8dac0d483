"""``ncclx compare``: two backend arms side by side, collectives and training parity (private).

Layers, each importing only those before it: ``_spec`` (arms, sizes, collectives, the
nccl-tests factors), ``_worker`` (one arm's ranks, run in their own processes), ``_run``
(starts the arms, bounds them by ``--timeout``, names hangs), ``_verdict`` (checks and
timings, arm against arm), ``_render`` / ``_html`` (text, JSON, the page), ``_train``
(``--train``: the user's command once per arm), ``_cli``.
"""

from __future__ import annotations

__all__: list[str] = []
