#!/usr/bin/python3
"""PyTorch reference for benchmarks/train: samples/s of a full training step (forward, loss, backward,
optimizer step) with one thread, for the SINGA CNN and the 784-512-256-10 MLP at batch 64.

Usage: OPENBLAS_NUM_THREADS=1 /usr/bin/python3 pytorch_train.py [--steps N] [--reps R] [--csv]
Prints one line per model: model, median samples/s over R repetitions of N steps.
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn


def singa_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(20, 50, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10))


def mlp():
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))


def bench(name, model, opt, shape, steps, reps, batch=64):
    torch.manual_seed(0)
    x = torch.rand((batch,) + shape)
    y = torch.randint(0, 10, (batch,))
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(max(5, steps // 10)):
        step()
    rates = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        rates.append(steps * batch / (time.perf_counter() - t0))
    return statistics.median(rates)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--models", default="cnn,mlp")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for name in args.models.split(","):
        if name == "cnn":
            m = singa_cnn()
            o = torch.optim.SGD(m.parameters(), lr=0.005, momentum=0.9, weight_decay=1e-5)
            r = bench(name, m, o, (1, 28, 28), args.steps, args.reps)
        elif name == "mlp":
            m = mlp()
            o = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
            r = bench(name, m, o, (784,), args.steps, args.reps)
        else:
            raise SystemExit(f"pytorch_train.py: unknown model '{name}' (known: cnn, mlp)")
        print(f"pytorch {name} {r:.1f}", flush=True)


if __name__ == "__main__":
    main()
