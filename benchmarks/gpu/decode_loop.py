#!/usr/bin/env python3
"""A serving engine's greedy decode loop over model-shaped networks, with FlashInfer's decode wrapper and kindex's
drop-in as interchangeable attention backends: the generated tokens must be identical, and each gets its tokens/s.

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

  python3 benchmarks/gpu/decode_loop.py --model llama-3-8b --backends flashinfer,kindex --out loop_llama.json
  python3 benchmarks/gpu/decode_loop.py --model gemma-2-9b --backends flashinfer,kindex --out loop_gemma.json

JSON: the command line, the device, the model's configuration, the prompt lengths, per backend its status, tokens/s
(decode steps only, batch x steps / wall time between synchronisations) and tokens, and the comparison against the
first backend: identical, or the first divergence (step, request, both tokens, the first backend's top-2 logit
margin there: a near-tie says rounding, a wide one a bug). Exit status 0: every backend ran and all agree; 3: a
divergence; 1: a backend failed (its error, e.g. a KindexError naming a variant the library does not run yet, is
recorded).
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


def decode(model: Model, cache, backend, first_tokens, steps, sync=lambda: None):
    """Greedy decode: `steps` tokens per request after the first. backend None: cache is a DenseKVCache.
    Returns (tokens [B][steps], top-2 margins [steps][B], seconds)."""
    torch, cfg = model.torch, model.cfg
    batch = len(first_tokens)
    tokens = [[] for _ in range(batch)]
    margins = []
    current = torch.tensor(first_tokens, device=model.device)
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        if backend is None:
            positions = torch.tensor([t.shape[0] for t in cache.k[0]], device=model.device)
        else:
            slots = [cache.append_slots(b, 1) for b in range(batch)]
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
        logits = model.logits(h)
        top = logits.topk(2, dim=-1)
        current = top.indices[:, 0]
        margins.append((top.values[:, 0] - top.values[:, 1]).tolist())
        for b, t in enumerate(current.tolist()):
            tokens[b].append(t)
    sync()
    return tokens, margins, time.perf_counter() - t0


def first_divergence(tokens, other, margins):
    """(step, request, token, other's token, the first run's top-2 margin there) of the earliest step where they
    differ, or None."""
    for step in range(len(tokens[0]) if tokens else 0):
        for b in range(len(tokens)):
            if tokens[b][step] != other[b][step]:
                return dict(step=step, request=b, token=tokens[b][step], other_token=other[b][step],
                            top2_margin=margins[step][b])
    return None


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


def run_loop(torch, cfg, backends, *, batch, steps, page_size, seed, max_prompt, dtype, device, pages=None):
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
    doc = dict(model=dataclasses.asdict(cfg), batch=batch, steps=steps, page_size=page_size, seed=seed,
               dtype=str(dtype).removeprefix("torch."), prompt_lengths=lengths, prefill_s=time.perf_counter() - t0,
               first_tokens=first, backends={})
    results = {}
    rc = 0
    for name in backends:
        entry = doc["backends"][name] = {}
        try:
            backend = make_backend(torch, name, cfg, dtype, device)
            run_cache = DenseKVCache(cache, cfg.layers) if backend is None else cache.clone()
            with torch.no_grad():
                tokens, margins, seconds = decode(model, run_cache, backend, first, steps, sync)
            results[name] = (tokens, margins)
            entry.update(status="ok", seconds=seconds, tokens_per_s=batch * steps / seconds, tokens=tokens)
        except Exception as e:  # noqa: BLE001 -- recorded: the other backends still run
            traceback.print_exc()
            entry.update(status="error", error=f"{type(e).__name__}: {e}")
            rc = 1
        finally:
            backend = run_cache = None
            if str(device).startswith("cuda"):
                torch.cuda.empty_cache()
    if results:
        base = next(iter(results))
        doc["compared_with"] = base
        for name, (tokens, _) in results.items():
            divergence = first_divergence(results[base][0], tokens, results[base][1])
            doc["backends"][name]["identical"] = divergence is None
            if divergence:
                doc["backends"][name]["first_divergence"] = divergence
                rc = rc or 3
    return doc, rc


def summary(doc):
    lines = [f"{doc['model_name']}: batch {doc['batch']}, {doc['steps']} steps, prompts {doc['prompt_lengths']}"]
    for name, e in doc["backends"].items():
        if e["status"] != "ok":
            lines.append(f"  {name}: {e['status']}: {e.get('error')}")
            continue
        same = "identical" if e.get("identical") else f"DIVERGES {e.get('first_divergence')}"
        lines.append(f"  {name}: {e['tokens_per_s']:.1f} tokens/s ({e['seconds']:.2f} s), {same} vs "
                     f"{doc['compared_with']}")
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
    ap.add_argument("--out", help="JSON output")
    args = ap.parse_args(argv)
    import torch
    cfg = MODELS[args.model]
    if args.layers:
        cfg = dataclasses.replace(cfg, layers=args.layers)
    max_prompt = args.max_prompt or (64 if args.model.startswith("tiny") else 6000)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    doc, rc = run_loop(torch, cfg, backends, batch=args.batch, steps=args.steps, page_size=args.page_size,
                       seed=args.seed, max_prompt=max_prompt, dtype=getattr(torch, args.dtype), device=args.device)
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
