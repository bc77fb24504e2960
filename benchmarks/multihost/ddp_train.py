#!/usr/bin/python3
"""PyTorch DDP (gloo) reference for benchmarks/multihost: samples/s of a full data-parallel training step
(zero_grad, forward, cross-entropy, backward with DDP's gradient all-reduce, SGD step) summed over all
ranks, for the same models, optimizer settings and synthetic batches as bench_train_dist: the SINGA CNN
(Conv2d(1,20,5)-ReLU-MaxPool2-Conv2d(20,50,5)-ReLU-MaxPool2-Flatten-Linear(800,500)-ReLU-Linear(500,10),
SGD lr 0.005, momentum 0.9, weight decay 1e-5) and the MLP 784-512-256-10 (SGD lr 0.01, momentum 0.9),
batch 64 per rank, one thread per rank.

One process per host, started by hand or by run.sh through `scripts/cluster.sh exec H -- ...`:

    GLOO_SOCKET_IFNAME=eth0 OPENBLAS_NUM_THREADS=1 /usr/bin/python3 ddp_train.py --rank R --world-size P \
        --master-addr 198.18.0.1 [--master-port 29500] [--model cnn|mlp] [--compression none|fp16|powersgd]
        [--powersgd-rank R] [--powersgd-start S] [--steps N] [--reps K] [--batch B] [--bucket-cap-mb M]

--compression fp16 registers DDP's built-in communication hook fp16_compress_hook (the gradient bucket is
cast to float16, all-reduced, cast back and divided by the world size); none keeps DDP's default
all-reduce. --compression powersgd registers DDP's powerSGD_hook with PowerSGDState(process_group=None,
matrix_approximation_rank=R, start_powerSGD_iter=S) (defaults 1 and 2; PyTorch needs S > 1 with its
default error feedback and warm start), as bench_train_dist's --compression powersgd. There is no bf16 here: PyTorch 1.13's bf16_compress_hook refuses to run without CUDA 11+ and
NCCL 2.10+, and its gloo cannot all-reduce bfloat16 tensors at all ("Invalid scalar type"); nor has DDP a
top-k hook (PowerSGD is a low-rank method, not top-k). --bucket-cap-mb is DDP's bucket size (default 25, DDP's own default: both models'
gradients then fit one bucket). Rank 0 prints one line

    ddp <model> gloo compression=<c> ranks=<P> median=<samples/s> min=<> max=<> step_ms=<median ms per step>
        grad_bytes=<bytes of the float gradient> bucket_cap_mb=<M>

(median, min and max over K repetitions of N steps, each between two barriers, after max(5, N/5) warm-up
steps, as bench_train_dist times its steps).
"""
import argparse
import datetime
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
from torch.nn.parallel import DistributedDataParallel as DDP

# The models of the single-process PyTorch reference (benchmarks/train/pytorch_train.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
from pytorch_train import mlp, singa_cnn  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world-size", type=int, required=True)
    ap.add_argument("--master-addr", default="198.18.0.1")
    ap.add_argument("--master-port", type=int, default=29500)
    ap.add_argument("--model", choices=["cnn", "mlp"], default="cnn")
    ap.add_argument("--compression", choices=["none", "fp16", "powersgd"], default="none")
    ap.add_argument("--powersgd-rank", type=int, default=1)
    ap.add_argument("--powersgd-start", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds gloo waits in one operation")
    args = ap.parse_args()
    if "GLOO_SOCKET_IFNAME" not in os.environ:
        print("ddp_train.py: GLOO_SOCKET_IFNAME is not set (eth0 on the simulated cluster)", file=sys.stderr)
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://{args.master_addr}:{args.master_port}", rank=args.rank,
        world_size=args.world_size, timeout=datetime.timedelta(seconds=args.timeout))

    torch.manual_seed(0)  # DDP broadcasts rank 0's parameters anyway
    if args.model == "cnn":
        net, shape = singa_cnn(), (1, 28, 28)
        make_opt = lambda p: torch.optim.SGD(p, lr=0.005, momentum=0.9, weight_decay=1e-5)  # noqa: E731
    else:
        net, shape = mlp(), (784,)
        make_opt = lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9)  # noqa: E731
    grad_bytes = 4 * sum(p.numel() for p in net.parameters())
    if args.compression == "powersgd":
        # One bucket: with DDP's 1 MB first bucket (two buckets), powerSGD_hook's chained all-reduces
        # failed in gloo with a size mismatch between the ranks (gloo/transport/tcp/pair.cc).
        dist._DEFAULT_FIRST_BUCKET_BYTES = int(args.bucket_cap_mb * 1024 * 1024)
    model = DDP(net, bucket_cap_mb=args.bucket_cap_mb)
    if args.compression == "fp16":
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif args.compression == "powersgd":
        state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=args.powersgd_rank,
                                       start_powerSGD_iter=args.powersgd_start)
        model.register_comm_hook(state, powersgd.powerSGD_hook)
    opt = make_opt(model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    # A fixed synthetic batch, different on every rank (as bench_train_dist's).
    g = torch.Generator().manual_seed(1 + args.rank)
    x = torch.rand((args.batch,) + shape, generator=g)
    y = torch.randint(0, 10, (args.batch,), generator=g)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(max(5, args.steps // 5)):
        step()
    rates, ms = [], []
    for _ in range(args.reps):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        dist.barrier()
        sec = time.perf_counter() - t0
        rates.append(args.steps * args.batch * args.world_size / sec)
        ms.append(1e3 * sec / args.steps)
    if args.rank == 0:
        print(f"ddp {args.model} gloo compression={args.compression} ranks={args.world_size} "
              f"median={statistics.median(rates):.1f} min={min(rates):.1f} max={max(rates):.1f} "
              f"step_ms={statistics.median(ms):.3f} grad_bytes={grad_bytes} "
              f"bucket_cap_mb={args.bucket_cap_mb:g}", flush=True)
    dist.barrier()
    # Leave without running destructors: with gloo, freeing the DDP model (which holds the process group)
    # after the peer has gone hung in ProcessGroupGloo's destructor in 1 of 12 runs here (also after
    # destroy_process_group()), until run.sh's timeout. Everything is measured and printed by now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
