#!/usr/bin/python3
"""PyTorch reference for benchmarks/train: samples/s of a full training step (forward, loss, backward,
optimizer step) and of inference (forward in eval mode, no autograd) with one thread, for the SINGA CNN and
the 784-512-256-10 MLP at batch 64 and the Needle ResNet9 (the layers of dtrain::zoo::resnet9) at batch 128.

Usage: OPENBLAS_NUM_THREADS=1 /usr/bin/python3 pytorch_train.py [--models cnn,mlp,resnet9]
           [--modes train,infer] [--steps N] [--reps R] [--batch B]
--batch overrides every model's batch (as bench_train_throughput's --batch).
Prints one line per model and mode: "pytorch <model> <mode> <median samples/s over R repetitions of N steps>",
then "pytorch_peak_rss_mib <MiB>" of the process.
"""
import argparse
import resource
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


def conv_bn(a, b, k, s):
    return [nn.Conv2d(a, b, k, stride=s, padding=k // 2), nn.BatchNorm2d(b), nn.ReLU()]


class Residual(nn.Module):
    def __init__(self, *layers):
        super().__init__()
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.body(x)


def resnet9():
    return nn.Sequential(
        *conv_bn(3, 16, 7, 4), *conv_bn(16, 32, 3, 2),
        Residual(*conv_bn(32, 32, 3, 1), *conv_bn(32, 32, 3, 1)),
        *conv_bn(32, 64, 3, 2), *conv_bn(64, 128, 3, 2),
        Residual(*conv_bn(128, 128, 3, 1), *conv_bn(128, 128, 3, 1)),
        nn.Flatten(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))


def bench(name, model, opt, shape, steps, reps, batch=64, train=True):
    torch.manual_seed(0)
    x = torch.rand((batch,) + shape)
    y = torch.randint(0, 10, (batch,))
    loss_fn = nn.CrossEntropyLoss()

    def infer():
        with torch.no_grad():
            model(x)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    model.train(train)
    if not train:
        step = infer
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
    ap.add_argument("--models", default="cnn,mlp,resnet9")
    ap.add_argument("--modes", default="train,infer")
    ap.add_argument("--batch", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    for name in args.models.split(","):
        if name == "cnn":
            m, shape, batch = singa_cnn(), (1, 28, 28), 64
            o = torch.optim.SGD(m.parameters(), lr=0.005, momentum=0.9, weight_decay=1e-5)
        elif name == "mlp":
            m, shape, batch = mlp(), (784,), 64
            o = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        elif name == "resnet9":
            m, shape, batch = resnet9(), (3, 32, 32), 128
            o = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
        else:
            raise SystemExit(f"pytorch_train.py: unknown model '{name}' (known: cnn, mlp, resnet9)")
        for mode in args.modes.split(","):
            if mode not in ("train", "infer"):
                raise SystemExit(f"pytorch_train.py: unknown mode '{mode}' (known: train, infer)")
            if args.batch > 0:
                batch = args.batch
            r = bench(name, m, o, shape, args.steps, args.reps, batch, mode == "train")
            print(f"pytorch {name} {mode} {r:.1f}", flush=True)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"pytorch_peak_rss_mib {rss:.1f}", flush=True)

if __name__ == "__main__":
    main()
