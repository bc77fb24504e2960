#!/usr/bin/python3
"""PyTorch's forward and backward time of every top-level layer of a model, on one thread: the PyTorch side
of bench_layer_times (same models as pytorch_train.py, same method). Each layer runs N forward passes
(training mode) on the activations of one real forward pass, then N backward passes of its own graph
(autograd, retained) with the gradient that reached it in one real backward pass; printed are the medians
over R repetitions, per pass. The first layer computes no input gradient.

Usage: OPENBLAS_NUM_THREADS=1 /usr/bin/python3 pytorch_layer_times.py [--model cnn|mlp|resnet9] [--batch B]
           [--steps N] [--reps R]
Prints "layer <i> <name> fwd_us <us> bwd_us <us>" per layer, then "total fwd_us <sum> bwd_us <sum>".
"""
import argparse
import statistics
import time

import torch

from pytorch_train import mlp, resnet9, singa_cnn


def timed(f, steps, reps):
    f()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(steps):
            f()
        samples.append((time.perf_counter() - t0) / steps * 1e6)
    return statistics.median(samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="cnn", choices=["cnn", "mlp", "resnet9"])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model, shape = {"cnn": (singa_cnn, (1, 28, 28)), "mlp": (mlp, (784,)),
                    "resnet9": (resnet9, (3, 32, 32))}[args.model]
    model = model()
    model.train()
    layers = list(model)
    # one real forward and backward: each layer's input and the gradient of its output
    acts = [torch.rand((args.batch,) + shape)]
    for layer in layers:
        acts.append(layer(acts[-1].detach()))
    grads = [torch.randn_like(acts[-1]) * 0.01]
    for i in range(len(layers) - 1, 0, -1):
        x = acts[i].detach().requires_grad_(True)
        layers[i](x).backward(grads[0])
        grads.insert(0, x.grad)
    tot_f = tot_b = 0.0
    for i, layer in enumerate(layers):
        x = acts[i].detach().requires_grad_(i > 0)
        fwd = timed(lambda: layer(x), args.steps, args.reps)
        y = layer(x)
        g = grads[i]
        bwd = timed(lambda: y.backward(g, retain_graph=True), args.steps, args.reps)
        tot_f += fwd
        tot_b += bwd
        name = repr(layer).replace("\n", " ").replace("  ", "")
        print(f"layer {i} {name} fwd_us {fwd:.1f} bwd_us {bwd:.1f}", flush=True)
    print(f"total fwd_us {tot_f:.1f} bwd_us {tot_b:.1f}")


if __name__ == "__main__":
    main()
