#!/usr/bin/env python3
"""A serving engine's greedy decode loop over model-shaped networks, with FlashInfer's decode wrapper and kindex's
drop-in as interchangeable attention backends: each backend's logits are checked against the first backend's on the
same token sequence, and each gets its tokens/s and per-step latency.

Models are built from their published configurations with random weights (no download): llama-3-8b (32 layers,
32 query / 8 KV heads, head_dim 128, RoPE theta 5e5, SwiGLU) and gemma-2-9b (42 layers, 16 / 8 heads, head_dim 256,
embedding scaled by sqrt(hidden), pre- and post-norms, GeGLU, attention logit soft-cap 50, a 4096-token sliding
window on every other layer, final logit soft-cap 30); tiny-llama and tiny-gemma are the same shapes scaled down
(the CPU test's). A batch of requests with uneven prompt lengths (drawn from --seed; some longer than Gemma's
window) is prefilled once with a plain torch attention (decode_reference.attend, identical for every backend) into
a paged KV cache whose pages are handed out from a shuffled free list; then each decode step, as an engine does:
append every request's token (a new page when the last one is full, last_page_len advanced), plan the attention
once per step (one wrapper per distinct window: Gemma's local and global layers), run it per layer, take the argmax.
RoPE is applied by the model (pos_encoding_mode NONE), as engines do.

Backends (--backends): flashinfer (flashinfer.BatchDecodeWithPagedKVCacheWrapper), kindex
(kindex.BatchDecodeWithPagedKVCacheWrapper, the same calls), reference (decode_reference.reference_decode over the
same page table, float32: slow, a check of the other two) and dense (no pages at all: each request's keys and
values in one growing tensor, attended with decode_reference.attend; checks the page bookkeeping). Every backend
starts from the same prefilled cache and first token.

Timing, the same for every backend, as an engine sees it: the backend is constructed (wrappers, workspaces, the
import of its module: `construct_s`), then --warmup-steps full decode steps are run untimed (plan + every layer +
the model's other work; the first pays FlashInfer's JIT compilation / module loading at its first plan() and run():
`warmup_step_s`) and rolled back (the cache's page lists and lengths restored: the timed steps see the same pages),
then --steps steps are timed one by one between torch.cuda.synchronize() calls (`step_s`). `setup_s` = construct_s
+ sum(warmup_step_s), the one-time cost, reported apart from tokens/s.

The check: the first backend (the baseline) decodes greedily from its own argmax; every other backend is
teacher-forced with the baseline's tokens (step s feeds the baseline's token of step s - 1), so all see the same
sequence and one flipped near-tie does not derail the rest. At every step and request the logits are compared with
the baseline's: max |difference|, and whether the argmax agrees. A disagreement is explained by a near-tie when the
baseline's margin between its token and the other backend's token, z[token] - z[other_token] (>= its top-2 margin),
is within the tie tolerance: --tie-ulps x the spacing of the model dtype at the baseline's top logit,
eps(dtype) x 2^floor(log2 |z_top|) (bf16: eps 2^-7, so 1/32 for logits in [4, 8)). The logits are the lm-head's bf16
products, so tokens a few of those spacings apart are tied at the precision the model computes them, and two correct
bf16 attention kernels (whose outputs differ by bf16 rounding) may order them either way. Any other disagreement is
unexplained: a failure. The default, 8 spacings (1/4 at the random models' top logits, ~5-6), is a measured bound
with room: on the CPU, the llama-3-8b shape cut to 8 / 16 / 24 layers, batch 16, 12 steps, against itself with every
attention output element moved one bf16 spacing up or down with probability 1/2 (harsher than two kernels' rounding),
flipped tokens at margins of at most 3, 3 and 4 spacings, with max |logit difference| 0.20, 0.30, 0.37; attention
over the wrong keys moves logits on the scale of the random model's spread (0.02 x sqrt(hidden) ~ 1.3: 40 spacings).

  python3 benchmarks/gpu/decode_loop.py --model llama-3-8b --backends flashinfer,kindex --out loop_llama.json
  python3 benchmarks/gpu/decode_loop.py --model gemma-2-9b --backends flashinfer,kindex --out loop_gemma.json

JSON: the command line, the device, the model's configuration, the prompt lengths, prefill_s, first_tokens,
compared_with (the baseline), tie_tolerance {ulps, dtype, eps, rule}, warmup_steps, and per backend:
  status ("ok" / "error"), error (on failure), teacher_forced (false for the baseline),
  construct_s, warmup_step_s [per warm-up step], setup_s (construct_s + the warm-up steps),
  seconds (the timed steps), tokens_per_s (batch x steps / seconds), step_s [per step], step_ms {median, mean, min,
  max} (per-step latency), tokens [request][step] (this backend's argmax at each step; for a teacher-forced backend
  the argmax given the baseline's sequence),
  and for each backend but the baseline, comparison: compared (steps x requests), argmax_agree,
  near_tie_disagreements, unexplained_disagreements, max_abs_logit_diff, max_abs_logit_diff_per_step [per step],
  disagreements [each: step, request, token (the baseline's), other_token, margin (baseline's z[token] -
  z[other_token]), top2_margin (the baseline's), tolerance, explained; the first 100], plus identical (every argmax
  agrees) and first_divergence (the first disagreement or absent).
Exit status 0: every backend ran and every disagreement is a near-tie; 3: an unexplained disagreement; 1: a backend
failed (its error, e.g. a KindexError naming a variant the library does not run yet, is recorded).
"""
import argparse
import dataclasses
import json
import math
import pathlib
import random
import sys
import time
import traceback

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "python" / "tests"))  # decode_reference: the one definition of the attention
sys.path.append(str(REPO / "python"))  # kindex from the source tree where none is installed (then KINDEX_LIBRARY)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    rope_theta: float
    rms_eps: float
    gemma: bool = False  # Gemma-2's block: scaled embedding, (1 + w) norms, post-norms, GeGLU, soft-caps
    sliding_window: int = 0  # tokens a local layer sees (0: none); Gemma-2: even layers are local
    attn_soft_cap: float = 0.0
    final_soft_cap: float = 0.0
    query_pre_attn_scalar: float = 0.0  # Gemma-2: sm_scale = 1/sqrt(this); else 1/sqrt(head_dim)

    @property
    def sm_scale(self):
        return 1.0 / math.sqrt(self.query_pre_attn_scalar or self.head_dim)

    def window_left(self, layer):
        """FlashInfer's window_left of a layer: a window of w tokens is the query and w - 1 before it."""
        local = self.sliding_window and self.gemma and layer % 2 == 0
        return self.sliding_window - 1 if local else -1


MODELS = {
    # Meta-Llama-3-8B's config.json
    "llama-3-8b": ModelConfig(vocab=128256, hidden=4096, layers=32, heads=32, kv_heads=8, head_dim=128,
                              intermediate=14336, rope_theta=500000.0, rms_eps=1e-5),
    # google/gemma-2-9b's config.json
    "gemma-2-9b": ModelConfig(vocab=256000, hidden=3584, layers=42, heads=16, kv_heads=8, head_dim=256,
                              intermediate=14336, rope_theta=10000.0, rms_eps=1e-6, gemma=True, sliding_window=4096,
                              attn_soft_cap=50.0, final_soft_cap=30.0, query_pre_attn_scalar=256),
    "tiny-llama": ModelConfig(vocab=512, hidden=128, layers=2, heads=4, kv_heads=2, head_dim=64, intermediate=256,
                              rope_theta=500000.0, rms_eps=1e-5),
    "tiny-gemma": ModelConfig(vocab=512, hidden=128, layers=4, heads=4, kv_heads=2, head_dim=64, intermediate=256,
                              rope_theta=10000.0, rms_eps=1e-6, gemma=True, sliding_window=24, attn_soft_cap=50.0,
                              final_soft_cap=30.0, query_pre_attn_scalar=64),
}


# --------------------------------------------------------------------------------------------------------------------
# The network (random weights, HF's initializer_range 0.02)
# --------------------------------------------------------------------------------------------------------------------
class Model:
    def __init__(self, torch, cfg: ModelConfig, dtype, device, seed):
        self.torch, self.cfg, self.dtype, self.device = torch, cfg, dtype, device
        gen = torch.Generator(device=device).manual_seed(seed)

        def weight(*shape):
            return (0.02 * torch.randn(shape, generator=gen, device=device, dtype=torch.float32)).to(dtype)

        def norm():  # Gemma's norms scale by (1 + w): w around 0; Llama's by w: around 1
            return (0.1 * torch.randn(cfg.hidden, generator=gen, device=device) + (0.0 if cfg.gemma else 1.0)).to(
                dtype)

        self.embed = weight(cfg.vocab, cfg.hidden)  # tied with the output head (both models tie or are shaped so)
        self.layers = []
        for _ in range(cfg.layers):
            layer = dict(qkv=weight((cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim, cfg.hidden),
                         o=weight(cfg.hidden, cfg.heads * cfg.head_dim),
                         gate_up=weight(2 * cfg.intermediate, cfg.hidden), down=weight(cfg.hidden, cfg.intermediate),
                         attn_norm=norm(), mlp_norm=norm())
            if cfg.gemma:
                layer.update(post_attn_norm=norm(), post_mlp_norm=norm())
            self.layers.append(layer)
        self.final_norm = norm()
        half = cfg.head_dim // 2
        i = torch.arange(half, device=device, dtype=torch.float64)
        self.inv_freq = 1.0 / cfg.rope_theta ** (i * 2 / cfg.head_dim)

    def rms_norm(self, x, w):
        torch = self.torch
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.cfg.rms_eps)
        return (y * ((1.0 + w.float()) if self.cfg.gemma else w.float())).to(x.dtype)

    def rope(self, x, positions):
        """Llama's rotary embedding on x [n, heads, D] at positions [n] (non-interleaved halves)."""
        torch = self.torch
        angle = positions.to(torch.float64)[:, None] * self.inv_freq[None, :]
        cos, sin = (f(angle).float()[:, None, :] for f in (torch.cos, torch.sin))
        half = x.shape[-1] // 2
        xf = x.float()
        x1, x2 = xf[..., :half], xf[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)

    def embed_tokens(self, tokens):
        h = self.embed[tokens]
        return h * math.sqrt(self.cfg.hidden) if self.cfg.gemma else h

    def qkv(self, layer, h, positions):
        """h [n, hidden] -> q [n, H, D], k, v [n, Hkv, D], RoPE applied at positions."""
        cfg, w = self.cfg, self.layers[layer]
        x = self.rms_norm(h, w["attn_norm"]) @ w["qkv"].T
        q, k, v = x.split([cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim], -1)
        q = self.rope(q.reshape(-1, cfg.heads, cfg.head_dim), positions)
        k = self.rope(k.reshape(-1, cfg.kv_heads, cfg.head_dim), positions)
        return q.contiguous(), k.contiguous(), v.reshape(-1, cfg.kv_heads, cfg.head_dim).contiguous()

    def finish_layer(self, layer, h, attn):
        """The rest of the block after attention: attn [n, H, D] -> the next hidden state."""
        torch, cfg, w = self.torch, self.cfg, self.layers[layer]
        a = attn.reshape(attn.shape[0], -1).to(self.dtype) @ w["o"].T
        if cfg.gemma:
            a = self.rms_norm(a, w["post_attn_norm"])
        h = h + a
        gate, up = (self.rms_norm(h, w["mlp_norm"]) @ w["gate_up"].T).chunk(2, dim=-1)
        act = torch.nn.functional.gelu(gate, approximate="tanh") if cfg.gemma else torch.nn.functional.silu(gate)
        m = (act * up) @ w["down"].T
        if cfg.gemma:
            m = self.rms_norm(m, w["post_mlp_norm"])
        return h + m

    def logits(self, h):
        torch = self.torch
        z = (self.rms_norm(h, self.final_norm) @ self.embed.T).float()
        if self.cfg.final_soft_cap:
            z = self.cfg.final_soft_cap * torch.tanh(z / self.cfg.final_soft_cap)
        return z


def attention_options(cfg: ModelConfig, layer):
    """decode_reference.attend's options of a layer."""
    return dict(window_left=cfg.window_left(layer), logits_soft_cap=cfg.attn_soft_cap)


# --------------------------------------------------------------------------------------------------------------------
# KV caches: paged (an engine's) and dense (the check of the paged one)
# --------------------------------------------------------------------------------------------------------------------
class PagedKVCache:
    """Per layer k, v [num_pages, page_size, Hkv, D] (NHD); pages handed out from a shuffled free list, so a
    request's pages are scattered and out of order, as in an engine that has run a while."""

    def __init__(self, torch, cfg, num_pages, page_size, dtype, device, seed):
        self.torch, self.page_size, self.device = torch, page_size, device
        shape = (num_pages, page_size, cfg.kv_heads, cfg.head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(cfg.layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(cfg.layers)]
        self.free = list(range(num_pages))
        random.Random(seed).shuffle(self.free)
        self.pages, self.lengths = [], []

    def add_request(self):
        self.pages.append([])
        self.lengths.append(0)
        return len(self.pages) - 1

    def append_slots(self, rid, n):
        """Room for n more tokens of request rid (new pages as the last fills); returns their (pages, slots)
        tensors and advances its length."""
        start = self.lengths[rid]
        end = start + n
        while len(self.pages[rid]) * self.page_size < end:
            if not self.free:
                raise RuntimeError(f"the KV cache is out of pages ({len(self.k[0])}): raise --pages")
            self.pages[rid].append(self.free.pop())
        self.lengths[rid] = end
        pos = range(start, end)
        pages = self.torch.tensor([self.pages[rid][p // self.page_size] for p in pos], device=self.device)
        slots = self.torch.tensor([p % self.page_size for p in pos], device=self.device)
        return pages, slots

    def write(self, layer, where, k, v):
        pages, slots = where
        self.k[layer][pages, slots] = k
        self.v[layer][pages, slots] = v

    def table(self):
        """kv_indptr, kv_indices, kv_last_page_len: host int32 tensors, as an engine hands them to plan()."""
        torch = self.torch
        indptr = [0]
        for p in self.pages:
            indptr.append(indptr[-1] + len(p))
        last = [n - (len(p) - 1) * self.page_size for n, p in zip(self.lengths, self.pages)]
        return (torch.tensor(indptr, dtype=torch.int32), torch.tensor([i for p in self.pages for i in p],
                                                                     dtype=torch.int32),
                torch.tensor(last, dtype=torch.int32))

    def checkpoint(self):
        """The bookkeeping (free list, page lists, lengths) to roll a warm-up step back to."""
        return list(self.free), [list(p) for p in self.pages], list(self.lengths)

    def rollback(self, mark):
        """Back to checkpoint(): the same pages are handed out again in the same order, and the rows a warm-up step
        wrote past the lengths are unseen until the next step overwrites them."""
        free, pages, lengths = mark
        self.free, self.pages, self.lengths = list(free), [list(p) for p in pages], list(lengths)

    def clone(self):
        other = PagedKVCache.__new__(PagedKVCache)
        other.__dict__.update(self.__dict__)
        other.k, other.v = [t.clone() for t in self.k], [t.clone() for t in self.v]
        other.free, other.pages, other.lengths = list(self.free), [list(p) for p in self.pages], list(self.lengths)
        return other

    def dense(self, layer, rid):
        """Request rid's keys and values [n, Hkv, D] in order (decode_reference's gather)."""
        import decode_reference as ref
        ids = self.torch.tensor(self.pages[rid], device=self.device)
        n = self.lengths[rid]
        return (ref.gather_request(self.k[layer], ids, n), ref.gather_request(self.v[layer], ids, n))


class DenseKVCache:
    """Per layer and request one [n, Hkv, D] tensor, grown by concatenation: no pages, no tables."""

    def __init__(self, paged: PagedKVCache, layers):
        self.torch = paged.torch
        self.k = [[paged.dense(layer, r)[0].clone() for r in range(len(paged.pages))] for layer in range(layers)]
        self.v = [[paged.dense(layer, r)[1].clone() for r in range(len(paged.pages))] for layer in range(layers)]

    def append(self, layer, k, v):
        """k, v [B, Hkv, D]: one new token per request."""
        cat = self.torch.cat
        self.k[layer] = [cat([old, k[b:b + 1]]) for b, old in enumerate(self.k[layer])]
        self.v[layer] = [cat([old, v[b:b + 1]]) for b, old in enumerate(self.v[layer])]

    def checkpoint(self):
        """append() makes new tensors: the old lists are the state to go back to."""
        return [list(rows) for rows in self.k], [list(rows) for rows in self.v]

    def rollback(self, mark):
        self.k, self.v = [list(rows) for rows in mark[0]], [list(rows) for rows in mark[1]]


# --------------------------------------------------------------------------------------------------------------------
# Attention backends: plan(cache) once per step, run(layer, q, cache) per layer
# --------------------------------------------------------------------------------------------------------------------
class WrapperBackend:
    """A FlashInfer-compatible BatchDecodeWithPagedKVCacheWrapper class (FlashInfer's or kindex's), one instance per
    distinct window of the model's layers, planned once per step with the same arguments."""

    def __init__(self, torch, wrapper_class, cfg, dtype, device, workspace_bytes=128 << 20):
        self.torch, self.cfg, self.dtype, self.device = torch, cfg, dtype, device
        windows = sorted({cfg.window_left(layer) for layer in range(cfg.layers)})
        self.wrappers = {w: wrapper_class(torch.zeros(workspace_bytes, dtype=torch.uint8, device=device), "NHD")
                         for w in windows}

    def plan(self, cache: PagedKVCache):
        cfg = self.cfg
        indptr, indices, last = cache.table()
        for window, wrapper in self.wrappers.items():
            wrapper.plan(indptr, indices, last, cfg.heads, cfg.kv_heads, cfg.head_dim, cache.page_size,
                         window_left=window, logits_soft_cap=cfg.attn_soft_cap or None, q_data_type=self.dtype,
                         kv_data_type=self.dtype, sm_scale=cfg.sm_scale)

    def run(self, layer, q, cache: PagedKVCache):
        return self.wrappers[self.cfg.window_left(layer)].run(q, (cache.k[layer], cache.v[layer]))


class ReferenceBackend:
    """decode_reference.reference_decode over the same page table (float32)."""

    def __init__(self, torch, cfg):
        self.torch, self.cfg = torch, cfg

    def plan(self, cache):
        self.table = [t.tolist() for t in cache.table()]

    def run(self, layer, q, cache):
        import decode_reference as ref
        out, _ = ref.reference_decode(q, cache.k[layer], cache.v[layer], *self.table, self.cfg.sm_scale,
                                      dtype=self.torch.float32, **attention_options(self.cfg, layer))
        return out.to(q.dtype)


def dense_attention(torch, cfg, layer, q, cache: DenseKVCache):
    import decode_reference as ref
    rows = [ref.attend(q[b:b + 1].float(), cache.k[layer][b].float(), cache.v[layer][b].float(), cfg.sm_scale,
                       **attention_options(cfg, layer))[0] for b in range(q.shape[0])]
    return torch.cat(rows).to(q.dtype)


TIE_ULPS = 8  # --tie-ulps: see the module docstring


# --------------------------------------------------------------------------------------------------------------------
# Prefill (shared by every backend) and the decode loop
# --------------------------------------------------------------------------------------------------------------------
def prefill(model: Model, cache: PagedKVCache, prompts, chunk=512):
    """Each prompt through the model into the cache (causal attention in float32, chunks of queries); returns
    the first generated token of each request."""
    import decode_reference as ref
    torch, cfg = model.torch, model.cfg
    first = []
    for tokens in prompts:
        rid = cache.add_request()
        n = len(tokens)
        where = cache.append_slots(rid, n)
        positions = torch.arange(n, device=model.device)
        h = model.embed_tokens(torch.tensor(tokens, device=model.device))
        for layer in range(cfg.layers):
            q, k, v = model.qkv(layer, h, positions)
            cache.write(layer, where, k, v)
            attn = torch.cat([ref.attend(q[s:min(s + chunk, n)].float(), k[:min(s + chunk, n)].float(),
                                         v[:min(s + chunk, n)].float(), cfg.sm_scale,
                                         **attention_options(cfg, layer))[0] for s in range(0, n, chunk)])
            h = model.finish_layer(layer, h, attn)
        first.append(int(model.logits(h[-1:]).argmax(-1)))
    return first


def decode_step(model: Model, cache, backend, current):
    """One decode step of every request on the token tensor `current` [B]: append its slot, plan once, run every
    layer. backend None: cache is a DenseKVCache. Returns the logits [B, vocab] (float32, on the model's device)."""
    torch, cfg = model.torch, model.cfg
    if backend is None:
        positions = torch.tensor([t.shape[0] for t in cache.k[0]], device=model.device)
    else:
        slots = [cache.append_slots(b, 1) for b in range(len(cache.lengths))]
        where = (torch.cat([s[0] for s in slots]), torch.cat([s[1] for s in slots]))
        positions = torch.tensor([n - 1 for n in cache.lengths], device=model.device)
        backend.plan(cache)  # once per step, as an engine does
    h = model.embed_tokens(current)
    for layer in range(cfg.layers):
        q, k, v = model.qkv(layer, h, positions)
        if backend is None:
            cache.append(layer, k, v)
            attn = dense_attention(torch, cfg, layer, q, cache)
        else:
            cache.write(layer, where, k, v)
            attn = backend.run(layer, q, cache)
        h = model.finish_layer(layer, h, attn)
    return model.logits(h)


def decode(model: Model, cache, backend, first_tokens, steps, sync=lambda: None, *, forced=None, warmup_steps=0):
    """Greedy decode: `steps` tokens per request after the first. backend None: cache is a DenseKVCache.

    forced: None (feed each step's argmax to the next) or the baseline's tokens [B][steps] (teacher forcing: step s
    is fed forced[.][s - 1]; the argmax is still taken, the same work). First `warmup_steps` untimed steps from the
    first tokens, each rolled back (cache.checkpoint / rollback); then every step timed alone between sync() calls.
    Returns dict(tokens [B][steps] (the argmax at each step), logits [steps] of [B, vocab] float32 on the host,
    step_s [steps], warmup_step_s [warmup_steps])."""
    torch = model.torch
    first = torch.tensor(first_tokens, device=model.device)
    warmup_s = []
    for _ in range(warmup_steps):
        mark = cache.checkpoint()
        sync()
        t0 = time.perf_counter()
        decode_step(model, cache, backend, first).argmax(-1)
        sync()
        warmup_s.append(time.perf_counter() - t0)
        cache.rollback(mark)
    # The forced tokens on the device before the timed steps (what an engine has there already).
    fed = [first] + ([torch.tensor([row[s] for row in forced], device=model.device) for s in range(steps - 1)]
                     if forced is not None else [])
    logits, argmax, step_s = [], [], []
    current = first
    sync()
    for s in range(steps):
        t0 = time.perf_counter()
        z = decode_step(model, cache, backend, current)
        top = z.argmax(-1)
        current = fed[s + 1] if forced is not None and s + 1 < steps else top
        sync()
        step_s.append(time.perf_counter() - t0)
        logits.append(z)
        argmax.append(top)
    tokens = torch.stack(argmax, dim=1).tolist() if steps else [[] for _ in first_tokens]
    return dict(tokens=tokens, logits=[z.float().cpu() for z in logits], step_s=step_s, warmup_step_s=warmup_s)


def logit_spacing(torch, dtype, z):
    """The spacing (ulp) of `dtype` at |z| (a tensor): eps x 2^floor(log2 |z|), |z| floored at the smallest normal."""
    info = torch.finfo(dtype)
    mag = z.abs().double().clamp(min=info.tiny)
    return info.eps * torch.exp2(torch.floor(torch.log2(mag)))


def compare_logits(torch, base, other, dtype, tie_ulps, keep=100):
    """base, other: [steps] of [B, vocab] float32 logits of the same sequence (other teacher-forced on base's
    tokens). Per step and request: the argmax agrees, or base's margin z[token] - z[other_token] is within
    tie_ulps x logit_spacing(base's top logit) (a near-tie), or it is unexplained. Returns the comparison dict."""
    res = dict(compared=0, argmax_agree=0, near_tie_disagreements=0, unexplained_disagreements=0,
               max_abs_logit_diff=0.0, max_abs_logit_diff_per_step=[], disagreements=[])
    for step, (zb, zo) in enumerate(zip(base, other)):
        diff = float((zo - zb).abs().max()) if zb.numel() else 0.0
        res["max_abs_logit_diff_per_step"].append(diff)
        res["max_abs_logit_diff"] = max(res["max_abs_logit_diff"], diff)
        top2 = zb.topk(2, dim=-1).values
        a, b = zb.argmax(-1), zo.argmax(-1)
        tol = tie_ulps * logit_spacing(torch, dtype, top2[:, 0])
        for r in range(zb.shape[0]):
            res["compared"] += 1
            if int(a[r]) == int(b[r]):
                res["argmax_agree"] += 1
                continue
            margin = float(zb[r, a[r]] - zb[r, b[r]])
            explained = margin <= float(tol[r])
            res["near_tie_disagreements" if explained else "unexplained_disagreements"] += 1
            if len(res["disagreements"]) < keep:
                res["disagreements"].append(dict(step=step, request=r, token=int(a[r]), other_token=int(b[r]),
                                                 margin=margin, top2_margin=float(top2[r, 0] - top2[r, 1]),
                                                 tolerance=float(tol[r]), explained=explained))
    return res


def step_summary(step_s):
    """Per-step latency in ms: median, mean, min, max."""
    ms = sorted(x * 1e3 for x in step_s)
    if not ms:
        return {}
    mid = len(ms) // 2
    median = ms[mid] if len(ms) % 2 else (ms[mid - 1] + ms[mid]) / 2
    return dict(median=median, mean=sum(ms) / len(ms), min=ms[0], max=ms[-1])


def prompt_lengths(cfg, batch, seed, max_len):
    """Uneven lengths in [1, max_len], the longest at max_len (past a sliding window when the model has one)."""
    gen = random.Random(seed)
    lengths = [gen.randint(1, max_len) for _ in range(batch - 1)] + [max_len]
    gen.shuffle(lengths)
    return lengths


def make_backend(torch, name, cfg, dtype, device):
    if name == "flashinfer":
        import flashinfer
        return WrapperBackend(torch, flashinfer.BatchDecodeWithPagedKVCacheWrapper, cfg, dtype, device)
    if name == "kindex":
        import kindex
        return WrapperBackend(torch, kindex.BatchDecodeWithPagedKVCacheWrapper, cfg, dtype, device)
    if name == "reference":
        return ReferenceBackend(torch, cfg)
    if name == "dense":
        return None
    raise ValueError(f"--backends: unknown backend {name!r} (flashinfer, kindex, reference, dense)")


def run_loop(torch, cfg, backends, *, batch, steps, page_size, seed, max_prompt, dtype, device, pages=None,
             warmup_steps=1, tie_ulps=TIE_ULPS):
    """The whole comparison; returns the JSON document's body and the exit status."""
    model = Model(torch, cfg, dtype, device, seed)
    lengths = prompt_lengths(cfg, batch, seed, max_prompt)
    gen = random.Random(seed + 1)
    prompts = [[gen.randrange(cfg.vocab) for _ in range(n)] for n in lengths]
    needed = sum((n + steps + page_size - 1) // page_size for n in lengths)
    cache = PagedKVCache(torch, cfg, pages or needed + 16, page_size, dtype, device, seed)
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)
    t0 = time.perf_counter()
    with torch.no_grad():
        first = prefill(model, cache, prompts)
    sync()
    # The logits are float32 copies of the model dtype's products: the coarser of the two sets the tie spacing.
    tie_dtype = dtype if torch.finfo(dtype).eps >= torch.finfo(torch.float32).eps else torch.float32
    doc = dict(model=dataclasses.asdict(cfg), batch=batch, steps=steps, page_size=page_size, seed=seed,
               dtype=str(dtype).removeprefix("torch."), prompt_lengths=lengths, prefill_s=time.perf_counter() - t0,
               first_tokens=first, warmup_steps=warmup_steps,
               tie_tolerance=dict(ulps=tie_ulps, dtype=str(tie_dtype).removeprefix("torch."),
                                  eps=torch.finfo(tie_dtype).eps,
                                  rule="a disagreement is a near-tie when the baseline's z[token] - z[other_token] "
                                       "<= ulps x eps x 2^floor(log2 |baseline's top logit|)"),
               backends={})
    base, base_logits = None, None
    rc = 0
    for name in backends:
        entry = doc["backends"][name] = {}
        backend = run_cache = None
        try:
            sync()
            t0 = time.perf_counter()
            backend = make_backend(torch, name, cfg, dtype, device)
            sync()
            construct_s = time.perf_counter() - t0
            run_cache = DenseKVCache(cache, cfg.layers) if backend is None else cache.clone()
            forced = doc["backends"][base]["tokens"] if base is not None else None
            with torch.no_grad():
                res = decode(model, run_cache, backend, first, steps, sync, forced=forced, warmup_steps=warmup_steps)
            seconds = sum(res["step_s"])
            entry.update(status="ok", teacher_forced=forced is not None, construct_s=construct_s,
                         warmup_step_s=res["warmup_step_s"], setup_s=construct_s + sum(res["warmup_step_s"]),
                         seconds=seconds, tokens_per_s=batch * steps / seconds if seconds > 0 else None,
                         step_ms=step_summary(res["step_s"]), step_s=res["step_s"], tokens=res["tokens"])
            if base is None:
                base, base_logits = name, res["logits"]
                continue
            cmp = compare_logits(torch, base_logits, res["logits"], tie_dtype, tie_ulps)
            entry["comparison"] = cmp
            entry["identical"] = cmp["argmax_agree"] == cmp["compared"]
            if cmp["disagreements"]:
                entry["first_divergence"] = cmp["disagreements"][0]
            if cmp["unexplained_disagreements"]:
                rc = rc or 3
        except Exception as e:  # noqa: BLE001 -- recorded: the other backends still run
            traceback.print_exc()
            entry.update(status="error", error=f"{type(e).__name__}: {e}")
            rc = 1
        finally:
            backend = run_cache = res = None
            if str(device).startswith("cuda"):
                torch.cuda.empty_cache()
    if base is not None:
        doc["compared_with"] = base
        doc["backends"][base]["identical"] = True
    return doc, rc


def summary(doc):
    lines = [f"{doc['model_name']}: batch {doc['batch']}, {doc['steps']} steps, prompts {doc['prompt_lengths']}"]
    for name, e in doc["backends"].items():
        if e["status"] != "ok":
            lines.append(f"  {name}: {e['status']}: {e.get('error')}")
            continue
        ms = e["step_ms"]
        rate = f"{e['tokens_per_s']:.1f} tokens/s" if e.get("tokens_per_s") else "no timed steps"
        lines.append(f"  {name}: {rate} ({e['seconds']:.3f} s; per step {ms.get('median', 0):.2f} ms median, "
                     f"{ms.get('min', 0):.2f}-{ms.get('max', 0):.2f}); one-time set-up {e['setup_s']:.2f} s "
                     f"(construct {e['construct_s']:.2f} s, warm-up steps "
                     f"{', '.join(f'{x:.2f}' for x in e['warmup_step_s']) or 'none'} s)")
        c = e.get("comparison")
        if c is None:
            lines.append("    the baseline: decodes from its own argmax; the others are teacher-forced on its tokens")
            continue
        verdict = "OK" if not c["unexplained_disagreements"] else "FAIL"
        lines.append(f"    vs {doc['compared_with']} (teacher-forced): {c['compared']} step x request compared, "
                     f"{c['argmax_agree']} argmax agree, {c['near_tie_disagreements']} near-tie disagreements, "
                     f"{c['unexplained_disagreements']} unexplained; max |logit diff| {c['max_abs_logit_diff']:.4g}"
                     f" -> {verdict}")
        for d in [d for d in c["disagreements"] if not d["explained"]][:5]:
            lines.append(f"      unexplained: {d}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=sorted(MODELS), required=True)
    ap.add_argument("--backends", default="flashinfer,kindex",
                    help="comma-separated, the first is the baseline: flashinfer, kindex, reference, dense")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=64, help="decode steps (tokens per request after the first)")
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--max-prompt", type=int, default=None,
                    help="the longest prompt (default 6000: past Gemma-2's 4096-token window; 64 for tiny models)")
    ap.add_argument("--layers", type=int, help="keep only the first N layers (a quicker run of the same shapes)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32", "float64"))
    ap.add_argument("--warmup-steps", type=int, default=1,
                    help="untimed full decode steps per backend before the timed ones (rolled back; >= 1: the first "
                         "pays JIT compilation / module loading)")
    ap.add_argument("--tie-ulps", type=float, default=TIE_ULPS,
                    help="a disagreement is a near-tie when the baseline's margin is within this many spacings of "
                         "the model dtype at its top logit")
    ap.add_argument("--out", help="JSON output")
    args = ap.parse_args(argv)
    if args.warmup_steps < 1 or args.steps < 1 or args.tie_ulps < 0:
        ap.error("--warmup-steps and --steps must be >= 1, --tie-ulps >= 0")
    import torch
    cfg = MODELS[args.model]
    if args.layers:
        cfg = dataclasses.replace(cfg, layers=args.layers)
    max_prompt = args.max_prompt or (64 if args.model.startswith("tiny") else 6000)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    doc, rc = run_loop(torch, cfg, backends, batch=args.batch, steps=args.steps, page_size=args.page_size,
                       seed=args.seed, max_prompt=max_prompt, dtype=getattr(torch, args.dtype), device=args.device,
                       warmup_steps=args.warmup_steps, tie_ulps=args.tie_ulps)
    device = {"name": "cpu"}
    if args.device.startswith("cuda"):
        p = torch.cuda.get_device_properties(torch.device(args.device))
        device = {"name": p.name, "capability": f"{p.major}.{p.minor}", "cuda": torch.version.cuda}
    versions = {"torch": torch.__version__}
    for module in ("flashinfer", "kindex"):
        if module in backends:
            mod = sys.modules.get(module)
            versions[module] = getattr(mod, "__version__", "?") if mod else "not imported"
    if "kindex" in sys.modules:
        kindex = sys.modules["kindex"]
        versions["libkindex_path"] = str(kindex.library_path())
        try:
            versions["libkindex"] = kindex.version()
        except kindex.KindexError as e:
            versions["libkindex"] = f"not loadable: {e}"
    doc = dict(benchmark="decode_loop", command=" ".join([sys.executable] + sys.argv), date_utc=time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime()), device=device, versions=versions, model_name=args.model, **doc)
    print(summary(doc))
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {args.out}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
