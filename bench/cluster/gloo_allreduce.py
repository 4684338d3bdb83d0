"""One rank of the insecure baseline: torch.distributed all_reduce of a d-float fp32 tensor over
gloo (what PyTorch DDP does with a gradient bucket, without the model), timed round by round.

Run on each host: gloo_allreduce.py RANK WORLD MASTER_ADDR PORT D ROUNDS WARMUP
Rank 0 prints one JSON line: {"seconds": [per-round wall time, after a barrier], ...}.
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    rank, world, master, port, d, rounds, warmup = sys.argv[1:8]
    rank, world, port, d, rounds, warmup = int(rank), int(world), int(port), int(d), int(rounds), int(warmup)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{master}:{port}", rank=rank, world_size=world)
    # A synthetic gradient: what the tensor holds does not change what gloo sends.
    grad = torch.empty(d, dtype=torch.float32).uniform_(-1.0, 1.0)
    for _ in range(warmup):
        dist.all_reduce(grad)
    seconds = []
    for _ in range(rounds):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(grad)
        seconds.append(time.perf_counter() - start)
    dist.barrier()
    if rank == 0:
        print(json.dumps({"seconds": seconds}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
