"""``ncclx compare``: two backend arms side by side, collectives and training parity (private).

Layers, each importing only those before it: ``_spec`` (arms, sizes, collectives, the
nccl-tests factors), ``_arms`` (the default arms, from torch's registry), ``_worker`` (one
arm's ranks, run in their own processes), ``_run`` (starts an arm, bounds it by
``--timeout``, names hangs), ``_cluster`` (``--cluster``: one rank per torchrun/srun task),
``_verdict`` (checks and timings, arm against arm), ``_render`` / ``_html`` (text and the
page; JSON is the verdict's dict), ``_train`` (``--train``: the user's command once per
arm; ``_trainlog`` reads its lines and errors, ``_trainspeed`` its step time), ``_cli``.  docs/compare.md describes what the user sees.
"""

from __future__ import annotations

__all__: list[str] = []
