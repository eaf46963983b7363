"""A stand-in for the few PyTorch calls a gqa_paged_decode definition's `reference` makes, on numpy, so that the
references of definitions/decode_variants run in CI, which has no torch (run_reference.py uses the real torch where
it is installed). Not a general torch: each call does what torch does for the arguments those references pass;
anything else raises. Tensors keep torch's dtype: float32 math in float32, float64 in float64; a bfloat16 / fp8 tensor
holds float32 values on its grid (`.to(torch.bfloat16)` rounds to nearest even as torch does).
"""
import math

import numpy as np


class dtype:  # noqa: N801 (torch's spelling)
    def __init__(self, name, storage):
        self.name, self.storage = name, storage

    def __repr__(self):
        return f"torch.{self.name}"


float32 = dtype("float32", np.float32)
float64 = dtype("float64", np.float64)
bfloat16 = dtype("bfloat16", np.float32)
float8_e4m3fn = dtype("float8_e4m3fn", np.float32)
float8_e5m2 = dtype("float8_e5m2", np.float32)
int32 = dtype("int32", np.int32)
long = int64 = dtype("int64", np.int64)
bool_ = dtype("bool", np.bool_)


def _round_bf16(a):
    """float32 values rounded to the nearest bfloat16, ties to even (NaN kept)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    out = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(a), a, out).astype(np.float32)


def _convert(values, target):
    if target is bfloat16:
        return _round_bf16(values.astype(np.float32))
    if target in (float8_e4m3fn, float8_e5m2):
        raise NotImplementedError("a cast to fp8: the references only read fp8 caches")
    return values.astype(target.storage)


class Tensor:
    def __init__(self, values, dtype_):
        self.a, self.dtype = values, dtype_

    # shape and elements
    @property
    def shape(self):
        return tuple(self.a.shape)

    @property
    def device(self):
        return "cpu"

    def __len__(self):
        return self.a.shape[0]

    def item(self):
        return self.a.item()

    def to(self, target):
        return Tensor(_convert(self.a, target), target)

    def _index(self, key):
        if isinstance(key, Tensor):
            return key.a
        if isinstance(key, tuple):
            return tuple(k.a if isinstance(k, Tensor) else k for k in key)
        return key

    def __getitem__(self, key):
        return Tensor(np.asarray(self.a[self._index(key)]), self.dtype)

    def __setitem__(self, key, value):
        self.a[self._index(key)] = _convert(value.a, self.dtype) if isinstance(value, Tensor) else value

    # reshaping
    def reshape(self, *shape):
        return Tensor(self.a.reshape(shape), self.dtype)

    def permute(self, *dims):
        return Tensor(np.transpose(self.a, dims), self.dtype)

    def transpose(self, d0, d1):
        return Tensor(np.swapaxes(self.a, d0, d1), self.dtype)

    def expand(self, *shape):
        return Tensor(np.broadcast_to(self.a, shape), self.dtype)

    def repeat_interleave(self, repeats, dim):
        return Tensor(np.repeat(self.a, repeats, axis=dim), self.dtype)

    def masked_fill(self, mask, value):
        return Tensor(np.where(mask.a, np.asarray(value, dtype=self.a.dtype), self.a), self.dtype)

    # arithmetic: the result keeps the tensor's dtype against a Python number, and torch's promotion between tensors
    def _binary(self, other, op, reverse=False):
        if isinstance(other, Tensor):
            wider = self.dtype if np.dtype(self.dtype.storage).itemsize >= np.dtype(other.dtype.storage).itemsize \
                else other.dtype
            x, y = self.a, other.a
        else:  # a Python number: an int keeps the tensor's dtype, a float makes an integer tensor float32
            floating = self.dtype.storage in (np.float32, np.float64)
            wider = self.dtype if floating or isinstance(other, int) else float32
            x, y = self.a.astype(wider.storage), np.asarray(other, dtype=wider.storage)
        result = op(y, x) if reverse else op(x, y)
        if result.dtype == np.bool_:
            return Tensor(result, bool_)
        return Tensor(result.astype(wider.storage), wider)

    def __add__(self, o): return self._binary(o, np.add)
    def __sub__(self, o): return self._binary(o, np.subtract)
    def __rsub__(self, o): return self._binary(o, np.subtract, True)
    def __mul__(self, o): return self._binary(o, np.multiply)
    def __rmul__(self, o): return self._binary(o, np.multiply, True)
    def __truediv__(self, o): return self._binary(o, np.divide)
    def __rtruediv__(self, o): return self._binary(o, np.divide, True)
    def __rpow__(self, o): return self._binary(o, np.power, True)
    def __le__(self, o): return self._binary(o, np.less_equal)
    def __ge__(self, o): return self._binary(o, np.greater_equal)
    def __and__(self, o): return Tensor(self.a & o.a, bool_)
    def __invert__(self): return Tensor(~self.a, bool_)


class no_grad:  # noqa: N801
    def __call__(self, fn):
        return fn


def zeros(shape, dtype=float32, device=None):
    return Tensor(np.zeros(shape, dtype=dtype.storage), dtype)


def full(shape, value, dtype=float32, device=None):
    return Tensor(np.full(shape, value, dtype=dtype.storage), dtype)


def arange(start, end=None, dtype=None, device=None):
    values = np.arange(start) if end is None else np.arange(start, end)
    dtype = dtype or int64
    return Tensor(values.astype(dtype.storage), dtype)


def cat(tensors, dim=0):
    return Tensor(np.concatenate([t.a for t in tensors], axis=dim), tensors[0].dtype)


def bmm(a, b):
    return Tensor(np.matmul(a.a, b.a), a.dtype)


def tanh(x):
    return Tensor(np.tanh(x.a), x.dtype)


def cos(x):
    return Tensor(np.cos(x.a), x.dtype)


def sin(x):
    return Tensor(np.sin(x.a), x.dtype)


def logsumexp(x, dim):
    m = np.max(x.a, axis=dim, keepdims=True)
    m = np.where(np.isinf(m), 0, m)  # torch's: rows of -inf give -inf, not NaN
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x.a - m), axis=dim)) + np.squeeze(m, axis=dim)
    return Tensor(out.astype(x.a.dtype), x.dtype)


def softmax(x, dim):
    with np.errstate(invalid="ignore"):
        e = np.exp(x.a - np.max(x.a, axis=dim, keepdims=True))
        return Tensor((e / np.sum(e, axis=dim, keepdims=True)).astype(x.a.dtype), x.dtype)


def tensor_of(values, dtype_):
    """Not a torch call (run_reference.py's way in): a tensor of `dtype_` over numpy values already on its grid
    (bfloat16, fp8: float32 values) or of its storage type."""
    return Tensor(np.ascontiguousarray(values, dtype=dtype_.storage), dtype_)


__all__ = [name for name in dir() if not name.startswith("_")] + ["math"]
