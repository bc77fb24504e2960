#!/usr/bin/env python3
# Writes the PyTorch reference files of tests/nn/state_dict_test.cpp. Run from the repository root:
#
#     python3 tests/nn/data/make_torch_weights.py
#
# (Debian: apt-get install python3-torch python3-numpy). The test reads the files written here and does
# not need PyTorch. With a fixed seed, it trains an MLP 4-16-3 and a small CNN for a few steps, puts them
# in eval mode and saves:
#   torch_mlp.npz         the MLP's state_dict, numpy.savez (stored entries)
#   torch_mlp_f64.npz     the same state_dict in float64
#   torch_cnn.npz         the CNN's state_dict (BatchNorm running statistics included),
#                         numpy.savez_compressed (deflate entries)
#   torch_io.npz          inputs and PyTorch's eval-mode outputs: mlp_x, mlp_y, mlp_y64, cnn_x, cnn_y
#   torch_mlp_f16.npz     the MLP's state_dict in float16 (a dtype load_state_dict refuses)
#   torch_mlp_fortran.npz the MLP's state_dict with fc1.weight in Fortran order (refused too)
import collections
import os

import numpy as np
import torch
from torch import nn

here = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(7)


def train(model, x, classes, steps=5):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    y = torch.randint(0, classes, (x.shape[0],))
    model.train()
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    model.eval()


def state_dict(model, dtype=np.float32):
    out = {}
    for k, v in model.state_dict().items():
        a = v.detach().cpu().numpy()
        out[k] = a.astype(dtype) if a.dtype.kind == "f" else a
    return out


mlp = nn.Sequential(collections.OrderedDict(fc1=nn.Linear(4, 16), relu=nn.ReLU(), fc2=nn.Linear(16, 3)))
train(mlp, torch.randn(32, 4), 3)
cnn = nn.Sequential(
    collections.OrderedDict(
        conv=nn.Conv2d(1, 4, 3, padding=1),
        bn=nn.BatchNorm2d(4),
        relu=nn.ReLU(),
        pool=nn.MaxPool2d(2),
        flatten=nn.Flatten(),
        fc=nn.Linear(4 * 4 * 4, 5),
    )
)
train(cnn, torch.randn(16, 1, 8, 8), 5)

mlp_x = torch.randn(8, 4)
cnn_x = torch.randn(6, 1, 8, 8)
with torch.no_grad():
    io = {
        "mlp_x": mlp_x.numpy(),
        "mlp_y": mlp(mlp_x).numpy(),
        "mlp_y64": mlp.double()(mlp_x.double()).numpy(),
        "cnn_x": cnn_x.numpy(),
        "cnn_y": cnn(cnn_x).numpy(),
    }
mlp.float()

np.savez(os.path.join(here, "torch_mlp.npz"), **state_dict(mlp))
np.savez(os.path.join(here, "torch_mlp_f64.npz"), **state_dict(mlp, np.float64))
np.savez_compressed(os.path.join(here, "torch_cnn.npz"), **state_dict(cnn))
np.savez_compressed(os.path.join(here, "torch_io.npz"), **io)
np.savez(os.path.join(here, "torch_mlp_f16.npz"), **state_dict(mlp, np.float16))
fortran = state_dict(mlp)
fortran["fc1.weight"] = np.asfortranarray(fortran["fc1.weight"])
np.savez(os.path.join(here, "torch_mlp_fortran.npz"), **fortran)
