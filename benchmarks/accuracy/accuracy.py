#!/usr/bin/python3
"""Error table of dtrain's float layers against float64, beside PyTorch float32 on the same inputs.

Runs bench_accuracy once per kernel set (DTRAIN_KERNELS=native, =avx2, =reference; and a second binary's
native and avx2 kernels with --before), then recomputes each case with PyTorch in float64 (the reference)
and in float32, and prints the relative RMS error of each result: ||result - float64|| / ||float64||, norms
over all the result's elements. Needs PyTorch (Debian's python3-torch) and numpy.

Usage: /usr/bin/python3 accuracy.py <bench_accuracy> [--before <bench_accuracy of the older code>]
"""
import argparse
import os
import subprocess
import tempfile

import numpy as np
import torch

CASES = {  # name: (layer, input shape, parameter shape, its meaning)
    "dense2304": ("Dense 2304->64, batch 64", (64, 2304), (64, 2304)),
    "dense16384": ("Dense 16384->64, batch 64", (64, 16384), (64, 16384)),
    "conv256": ("Conv2d 256->256 3x3 pad 1, 16x256x8x8 (fan-in 2,304)", (16, 256, 8, 8), (256, 256, 3, 3)),
    "conv256_nopad": ("Conv2d 256->256 3x3 pad 0, 16x256x8x8 (fan-in 2,304)", (16, 256, 8, 8),
                      (256, 256, 3, 3)),
    "conv512": ("Conv2d 512->512 3x3 pad 1, 16x512x4x4 (fan-in 4,608)", (16, 512, 4, 4), (512, 512, 3, 3)),
    "conv3": ("Conv2d 3->16 3x3 pad 0, 64x3x34x34 (fan-in 27; dw over 65,536 positions)", (64, 3, 34, 34),
              (16, 3, 3, 3)),
    "batchnorm": ("BatchNorm2d(16) training, 32x16x8x8, mean/std = 500", (32, 16, 8, 8), (16,)),
}
RESULTS = ["y", "dx", "dw", "db"]


def load(d, case, t, shape=None):
    a = np.fromfile(os.path.join(d, f"{case}.{t}.f32"), dtype=np.float32)
    return a.reshape(shape) if shape is not None else a


def torch_results(d, case, dtype):
    _, xs, ws = CASES[case]
    x = torch.tensor(load(d, case, "x", xs), dtype=dtype, requires_grad=True)
    w = torch.tensor(load(d, case, "w", ws), dtype=dtype, requires_grad=True)
    b = torch.tensor(load(d, case, "b"), dtype=dtype, requires_grad=True)
    if case.startswith("dense"):
        y = torch.nn.functional.linear(x, w, b)
    elif case.startswith("conv"):
        y = torch.nn.functional.conv2d(x, w, b, padding=0 if case in ("conv256_nopad", "conv3") else 1)
    else:
        y = torch.nn.functional.batch_norm(x, None, None, w, b, training=True, eps=1e-5)
    dy = torch.tensor(load(d, case, "dy", tuple(y.shape)), dtype=dtype)
    y.backward(dy)
    return {"y": y, "dx": x.grad, "dw": w.grad, "db": b.grad}


def rel_rms(a, ref):
    a = np.asarray(a, dtype=np.float64).ravel()
    return float(np.linalg.norm(a - ref) / np.linalg.norm(ref))


def run(binary, kernels, d):
    env = dict(os.environ, DTRAIN_KERNELS=kernels, OPENBLAS_NUM_THREADS="1")
    subprocess.run([binary, d], env=env, check=True, stdout=subprocess.DEVNULL)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("binary")
    p.add_argument("--before", help="bench_accuracy built from the code to compare with")
    args = p.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        runs = [("native", args.binary, "native"), ("avx2", args.binary, "avx2"),
                ("reference", args.binary, "reference")]
        if args.before:
            runs[:0] = [("native before", args.before, "native"), ("avx2 before", args.before, "avx2")]
        dirs = {}
        for label, binary, kernels in runs:
            dirs[label] = os.path.join(tmp, label.replace(" ", "_"))
            os.makedirs(dirs[label])
            run(binary, kernels, dirs[label])
        # the inputs do not depend on the kernels: every run wrote the same ones
        base = dirs["native"]
        for label, d in dirs.items():
            for case in CASES:
                for t in ["x", "w", "b", "dy"]:
                    assert np.array_equal(load(d, case, t), load(base, case, t)), (label, case, t)
        labels = [r[0] for r in runs]
        print("relative RMS error vs float64: ||r - r64|| / ||r64||")
        print("| layer | result | PyTorch float32 | " + " | ".join(f"dtrain {l}" for l in labels) +
              " | native / PyTorch |")
        print("|---|---|---|" + "---|" * len(labels) + "---|")
        for case, (title, _, _) in CASES.items():
            ref = {k: v.detach().numpy().ravel() for k, v in torch_results(base, case, torch.float64).items()}
            t32 = {k: v.detach().numpy().ravel() for k, v in torch_results(base, case, torch.float32).items()}
            for r in RESULTS:
                et = rel_rms(t32[r], ref[r])
                es = [rel_rms(load(dirs[l], case, r), ref[r]) for l in labels]
                print(f"| {title} | {r} | {et:.2e} | " + " | ".join(f"{e:.2e}" for e in es) +
                      f" | {es[labels.index('native')] / et:.2f} |")


if __name__ == "__main__":
    main()
