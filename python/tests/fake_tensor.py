"""A stand-in with what kindex's argument checks read of a tensor (shape, dtype, device, contiguity), so they
are tested where PyTorch is not installed (CI)."""

import math


class FakeDevice:
    def __init__(self, spec: str):
        self.type, _, index = spec.partition(":")
        self.index = int(index) if index else None

    def __eq__(self, other):
        return (self.type, self.index) == (other.type, other.index)

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


class FakeTensor:
    def __init__(self, shape, dtype="bfloat16", device="cuda:0", contiguous=True):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.device = FakeDevice(device)
        self._contiguous = contiguous

    def is_contiguous(self):
        return self._contiguous

    def stride(self):
        strides, step = [], 1
        for d in reversed(self.shape):
            strides.insert(0, step)
            step *= d
        return tuple(strides) if self._contiguous else tuple(reversed(strides))

    def item(self):
        return 1.0 / math.sqrt(128)


def fake_factory(shape, dtype, device="cuda:0", contiguous=True):
    return FakeTensor(shape, dtype, device, contiguous)


def torch_factory(shape, dtype, device="cpu", contiguous=True):
    """Real torch tensors on a device (meta: no memory, no GPU); a non-contiguous one is a transposed view."""
    import torch

    dt = getattr(torch, dtype)
    if contiguous:
        return torch.empty(shape, dtype=dt, device=device)
    return torch.empty(tuple(reversed(shape)), dtype=dt, device=device).permute(*reversed(range(len(shape))))
