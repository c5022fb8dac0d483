"""A tiny deterministic CPU training run for `ncclx compare --train` (tests/compare).

One gloo-family process group of one rank, built with the backend ncclx compare names in
NCCLX_COMPARE_BACKEND; gradients are all-reduced through it, so a perturbed backend changes
the numbers.  Prints "step=N loss=X" with N from 0, as a training loop counts, and X in full
(repr), as a comparison needs.  For the tests, from the arm's environment: TINY_SLEEP seconds
of extra work per step, and TINY_FAIL_AT, a step that raises as a broken script would."""

import os
import sys
import time

import torch
import torch.distributed as dist

torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
steps = int(sys.argv[1])
sleep = float(os.environ.get("TINY_SLEEP", "0"))
fail_at = int(os.environ.get("TINY_FAIL_AT", "-1"))
store = dist.HashStore()
dist.init_process_group(os.environ["NCCLX_COMPARE_BACKEND"], store=store, rank=0, world_size=1)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 8), torch.randn(32, 1)
for step in range(steps):
    if step == fail_at:
        raise RuntimeError(f"tiny: the batch at step {step} has the wrong shape")
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    opt.step()
    time.sleep(sleep)
    print(f"step={step} loss={loss.item()!r}", flush=True)
dist.destroy_process_group()
