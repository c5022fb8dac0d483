"""torch's torchfrtrace (python fr_trace_sorted.py FOLDER ARGS...), reading each folder's
files in sorted order: it takes the first rank it reads as the reference when it compares
collectives, and reads files in directory order; sorted, rank 0 is the reference (our
analyzer breaks ties towards the lowest rank too)."""

import os
import sys

from torch.distributed.flight_recorder.fr_trace import main

_walk = os.walk
os.walk = lambda *a, **k: ((r, d, sorted(f)) for r, d, f in _walk(*a, **k))  # type: ignore[assignment]
main(sys.argv[1:])
