"""A tiny deterministic CPU training run for `ncclx compare --train` (tests/compare).

One gloo-family process group of one rank, built with the backend ncclx compare names in
NCCLX_COMPARE_BACKEND; gradients are all-reduced through it, so a perturbed backend changes
the numbers.  Prints "step N loss=X" with X in full (repr), as a comparison needs."""

import os
import sys

import torch
import torch.distributed as dist

torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
steps = int(sys.argv[1])
store = dist.HashStore()
dist.init_process_group(os.environ["NCCLX_COMPARE_BACKEND"], store=store, rank=0, world_size=1)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 8), torch.randn(32, 1)
for step in range(1, steps + 1):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    opt.step()
    print(f"step {step} loss={loss.item()!r}", flush=True)
dist.destroy_process_group()
