"""Tiny data-parallel trainer: the demo target of `ncclx migrate`.

Launch with launch.sh (torchrun) or launch.sbatch (Slurm). It pins the legacy NCCL
backend the way many 2.14-era jobs did when nccl2 first shipped.
"""

from __future__ import annotations

import argparse
import datetime
import os

# Stay on the legacy ProcessGroupNCCL until we have validated nccl2.
os.environ["TORCH_DIST_USE_NCCL2"] = "0"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from dist_utils import barrier, dump_flight_recorder, init_distributed, set_collective_timeout  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--dist-backend", default="nccl-legacy", choices=["nccl", "nccl-legacy", "gloo"])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--trace-dir", default="/tmp/fr")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    local_rank = init_distributed(args.dist_backend)
    device = torch.device("cuda", local_rank) if args.dist_backend != "gloo" else torch.device("cpu")

    model = DDP(torch.nn.Linear(32, 1).to(device), device_ids=[local_rank] if device.type == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    set_collective_timeout(datetime.timedelta(minutes=5))
    try:
        for step in range(args.steps):
            x = torch.randn(64, 32, device=device)
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 10 == 0 and dist.get_rank() == 0:
                print(f"step {step} loss {loss.item():.4f}")
    except Exception:
        os.makedirs(args.trace_dir, exist_ok=True)
        dump_flight_recorder(os.path.join(args.trace_dir, f"rank{dist.get_rank()}.pkl"))
        raise
    barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
