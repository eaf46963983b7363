#!/usr/bin/env python3
"""Why the bf16 + fp8 + RoPE GPU test cases fail the comparator (README.md here): a numpy model of one query row
with the tests' data (q near-normal in bf16, K and V fp8 draws of magnitude 2^-3 .. 2^2 x 1.m, soft-cap 20,
v_scale 2, d 128, 300 keys, RoPE at the keys' positions), float64 truth against the kernel's roundings: the rotated
q and keys rounded to bf16 for the MMA, P rounded to bf16 for P V. Prints the share of output elements beyond both
atol and rtol 0.01 (FlashInfer-Bench's comparator) per rounding, 200 draws each.

  python3 results/decode/v7_h100/rope_precision.py
"""
import numpy as np

rng = np.random.default_rng(1)


def bf16(x):  # round to nearest even bf16, back as float64
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32).astype(np.float64)


def fp8_draw(shape):  # e4m3 values with exponents -3..2 (tests/gpu/test_decode.cpp fp8_draw)
    e, m, s = rng.integers(0, 6, shape), rng.integers(0, 8, shape), rng.integers(0, 2, shape)
    return (1 - 2 * s) * (1 + m / 8) * 2.0 ** (e - 3)


def rope(x, pos, theta=1e4, scale=2.0):  # Llama rotate-half
    h = x.shape[-1] // 2
    a = pos[:, None] / (scale * theta ** (2 * np.arange(h) / (2 * h)))[None, :]
    return np.concatenate([x[..., :h] * np.cos(a) - x[..., h:] * np.sin(a),
                           x[..., h:] * np.cos(a) + x[..., :h] * np.sin(a)], -1)


def share_failing(scores, d=128, n=300, cap=20.0, v_scale=2.0):
    q, k, v = bf16(rng.standard_normal(d)), fp8_draw((n, d)), fp8_draw((n, d))
    qr, kr = rope(q[None, :], np.array([n - 1.0]))[0], rope(k, np.arange(n, dtype=float))

    def attend(s, round_p):
        s = cap * np.tanh(s / np.sqrt(d) / cap)
        p = np.exp(s - s.max())
        return ((bf16(p) if round_p else p) @ v) / p.sum() * v_scale

    ref, out = attend(kr @ qr, False), attend(scores(qr, kr), True)
    diff = np.abs(out - ref)
    return ((diff > 0.01) & (diff > 0.01 * np.abs(ref))).mean()


def hi_lo(x):
    return bf16(x), bf16(x - bf16(x))


MODELS = {
    "P rounded only (rotated q, k exact)": lambda q, k: k @ q,
    "rotated q and k rounded to bf16 (the kernel)": lambda q, k: bf16(k) @ bf16(q),
    "rotated k as bf16 hi + lo, q rounded": lambda q, k: (hi_lo(k)[0] + hi_lo(k)[1]) @ bf16(q),
    "q and k as bf16 hi + lo (3 MMAs)": lambda q, k: (hi_lo(k)[0] @ hi_lo(q)[0] + hi_lo(k)[1] @ hi_lo(q)[0]
                                                      + hi_lo(k)[0] @ hi_lo(q)[1]),
}
for name, scores in MODELS.items():
    print(f"{name}: {np.mean([share_failing(scores) for _ in range(200)]):.4f} of elements fail")
