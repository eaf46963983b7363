"""A drop-in for flashinfer.BatchDecodeWithPagedKVCacheWrapper (FlashInfer 0.7.2) over kindex's paged decode.

Same constructor, plan() and run() contract, with FlashInfer's argument names, defaults and semantics for what
kindex's C ABI models (kindex.h, struct version 2): NHD or HND caches, fp16/bf16 queries with KV in q's dtype or
fp8 (e4m3 / e5m2) and k_scale / v_scale, several query tokens per request, a sliding window, a logit soft-cap,
attention sinks, Llama RoPE inside attention, the base-2 lse. Every option is handed to the library as it is:
a variant its kernels do not run yet comes back as a KindexError naming the field. What neither the C ABI nor
this wrapper models (ALiBi, fp8 queries, NVFP4 KV, skip-softmax, a right window, caller-owned block tables,
another backend) raises NotImplementedError naming the argument, instead of computing something else. The
differences that remain are listed in python/README.md.
"""

import functools
import math
import warnings
from typing import Optional, Tuple, Union

import torch

from . import _capi, ops
from ._checks import DECODE_KV_LAYOUTS, check_positive, check_scale

_CLASS = "kindex.BatchDecodeWithPagedKVCacheWrapper"
_Q_DTYPES = (torch.float16, torch.bfloat16)


def _canonical_dtype(arg: str, value) -> torch.dtype:
    """FlashInfer's dtype arguments: a torch.dtype or its name ("float16", "bfloat16", "float8_e4m3fn", ...)."""
    dtype = getattr(torch, value, None) if isinstance(value, str) else value
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"{_CLASS}.plan: {arg} = {value!r}: expected a torch.dtype or its name")
    return dtype


def _unsupported(method: str, arg: str, value, why: str):
    raise NotImplementedError(f"{_CLASS}.{method}: {arg} = {value!r}: {why}")


class _Described(str):
    """A description that shows unquoted in a message's `{value!r}`."""

    __repr__ = str.__str__


def _describe(value):
    return _Described(f"tensor of shape {list(value.shape)}") if torch.is_tensor(value) else value


class BatchDecodeWithPagedKVCacheWrapper:
    """flashinfer.BatchDecodeWithPagedKVCacheWrapper's interface on kindex's kernel.

    float_workspace_buffer is kindex's split-KV scratch and holds its plan (it needs far less than FlashInfer's
    recommended 128 MB; a buffer too small is reported naming the size needed). With use_cuda_graph=True, plan()
    copies the page table into the given buffers, as FlashInfer does, so a captured run() reads the new values.
    """

    def __init__(self, float_workspace_buffer: torch.Tensor, kv_layout: str = "NHD", use_cuda_graph: bool = False,
                 use_tensor_cores: bool = False, paged_kv_indptr_buffer: Optional[torch.Tensor] = None,
                 paged_kv_indices_buffer: Optional[torch.Tensor] = None,
                 paged_kv_last_page_len_buffer: Optional[torch.Tensor] = None, backend: str = "auto",
                 jit_args=None) -> None:
        if kv_layout not in DECODE_KV_LAYOUTS:
            raise ValueError(f"{_CLASS}: kv_layout = {kv_layout!r}: expected 'NHD' or 'HND'")
        if backend != "auto":
            _unsupported("__init__", "backend", backend, "kindex has one kernel; pass backend='auto'")
        if jit_args is not None:
            _unsupported("__init__", "jit_args", _Described("..."), "kindex has no JIT variants")
        if not torch.is_tensor(float_workspace_buffer):
            raise ValueError(f"{_CLASS}: float_workspace_buffer must be a tensor")
        if use_cuda_graph:
            for name, buf in (("paged_kv_indptr_buffer", paged_kv_indptr_buffer),
                              ("paged_kv_indices_buffer", paged_kv_indices_buffer),
                              ("paged_kv_last_page_len_buffer", paged_kv_last_page_len_buffer)):
                if not torch.is_tensor(buf):
                    raise ValueError(f"{_CLASS}: {name} should be a torch.Tensor in cudagraph mode")
            if len(paged_kv_indptr_buffer) != len(paged_kv_last_page_len_buffer) + 1:
                raise ValueError(f"{_CLASS}: the size of paged_kv_indptr_buffer should be batch_size + 1")
            self._fixed_batch_size = len(paged_kv_last_page_len_buffer)
        else:
            self._fixed_batch_size = 0
        self._kv_layout = kv_layout
        self._float_workspace_buffer = float_workspace_buffer
        self.device = float_workspace_buffer.device
        self._use_cuda_graph = use_cuda_graph
        # kindex picks its own kernel: FlashInfer's tensor-core choice has no counterpart here (kindex runs
        # q_len_per_req > 1 either way, where FlashInfer needs use_tensor_cores=True).
        self._use_tensor_cores = use_tensor_cores
        self._backend = backend
        self._indptr_buf = paged_kv_indptr_buffer
        self._indices_buf = paged_kv_indices_buffer
        self._last_page_len_buf = paged_kv_last_page_len_buffer
        self._planned = None

    @property
    def is_cuda_graph_enabled(self) -> bool:
        return self._use_cuda_graph

    @property
    def use_tensor_cores(self) -> bool:
        return self._use_tensor_cores

    def reset_workspace_buffer(self, float_workspace_buffer: torch.Tensor, int_workspace_buffer=None) -> None:
        self._float_workspace_buffer = float_workspace_buffer

    def plan(self, indptr: torch.Tensor, indices: torch.Tensor, last_page_len: torch.Tensor, num_qo_heads: int,
             num_kv_heads: int, head_dim: int, page_size: int, pos_encoding_mode: str = "NONE",
             window_left: int = -1, logits_soft_cap: Optional[float] = None,
             q_data_type: Optional[Union[str, torch.dtype]] = "float16",
             kv_data_type: Optional[Union[str, torch.dtype]] = None,
             o_data_type: Optional[Union[str, torch.dtype]] = None,
             data_type: Optional[Union[str, torch.dtype]] = None, sm_scale: Optional[float] = None,
             rope_scale: Optional[float] = None, rope_theta: Optional[float] = None, non_blocking: bool = True,
             block_tables: Optional[torch.Tensor] = None, seq_lens: Optional[torch.Tensor] = None,
             fixed_split_size: Optional[int] = None, disable_split_kv: bool = False, q_len_per_req: int = 1,
             *, window_right: int = 0, is_causal: Optional[bool] = None) -> None:
        """FlashInfer's plan(): the page table (int32, on any device), the problem's sizes and the variant.
        disable_split_kv is accepted and changes nothing: kindex's result does not depend on its split."""
        fn = f"{_CLASS}.plan"
        for name, value in (("block_tables", block_tables), ("seq_lens", seq_lens),
                            ("fixed_split_size", fixed_split_size)):
            if value is not None:
                _unsupported("plan", name, _describe(value), "kindex takes the page table as indptr / indices / "
                             "last_page_len")
        if window_right != 0:
            _unsupported("plan", "window_right", window_right, "kindex's window ends at the query (0)")
        variant = ops.decode_variant(fn, self._kv_layout, None, None, q_len_per_req, window_left, logits_soft_cap,
                                     None, pos_encoding_mode, rope_scale, rope_theta)
        if is_causal is not None and is_causal != (variant["q_len_per_req"] > 1):
            _unsupported("plan", "is_causal", is_causal, "the mask follows from q_len_per_req, as in FlashInfer: "
                         "causal among a request's query tokens when there are several")
        if data_type is not None:
            q_data_type = q_data_type if q_data_type not in (None, "float16") else data_type
            kv_data_type = kv_data_type if kv_data_type is not None else data_type
        q_dtype = _canonical_dtype("q_data_type", q_data_type if q_data_type is not None else "float16")
        kv_dtype = _canonical_dtype("kv_data_type", kv_data_type) if kv_data_type is not None else q_dtype
        o_dtype = _canonical_dtype("o_data_type", o_data_type) if o_data_type is not None else q_dtype
        if q_dtype not in _Q_DTYPES:
            _unsupported("plan", "q_data_type", q_dtype, "kindex takes float16 or bfloat16 queries")
        if kv_dtype != q_dtype and kv_dtype not in ops.FP8_KV_FORMATS:
            _unsupported("plan", "kv_data_type", kv_dtype, f"kindex takes the KV cache in q's dtype ({q_dtype}), "
                         "torch.float8_e4m3fn or torch.float8_e5m2")
        if o_dtype != q_dtype:
            _unsupported("plan", "o_data_type", o_dtype, f"kindex writes the output in q's dtype ({q_dtype})")
        for name, t in (("indptr", indptr), ("indices", indices), ("last_page_len", last_page_len)):
            if not torch.is_tensor(t) or t.dtype != torch.int32 or t.dim() != 1:
                raise ValueError(f"{fn}: {name} must be a 1-D int32 tensor, got "
                                 f"{t.dtype if torch.is_tensor(t) else type(t).__name__}"
                                 f"{' of shape ' + str(list(t.shape)) if torch.is_tensor(t) else ''}")
        batch_size = len(last_page_len)
        if len(indptr) != batch_size + 1:
            raise ValueError(f"{fn}: indptr has {len(indptr)} entries; expected batch_size + 1 = {batch_size + 1} "
                             "(batch_size from last_page_len)")
        if num_kv_heads < 1 or num_qo_heads % num_kv_heads:
            raise ValueError(f"{fn}: num_qo_heads = {num_qo_heads} must be a multiple of num_kv_heads = "
                             f"{num_kv_heads}")
        if self._use_cuda_graph:
            if batch_size != self._fixed_batch_size:
                raise ValueError(f"{fn}: the batch size {batch_size} differs from the cudagraph buffers' "
                                 f"{self._fixed_batch_size}")
            if len(indices) > len(self._indices_buf):
                raise ValueError(f"{fn}: {len(indices)} indices do not fit paged_kv_indices_buffer "
                                 f"({len(self._indices_buf)})")
            if self._planned is not None and self._planned["variant"] != variant:
                raise ValueError(f"{fn}: the variant (q_len_per_req, window, soft-cap, RoPE) is part of the "
                                 "captured graph in cudagraph mode: use a separate wrapper per variant")
            self._indptr_buf.copy_(indptr, non_blocking=non_blocking)
            self._last_page_len_buf.copy_(last_page_len, non_blocking=non_blocking)
            self._indices_buf[:len(indices)].copy_(indices, non_blocking=non_blocking)
            dev_indptr, dev_last = self._indptr_buf, self._last_page_len_buf
            dev_indices = self._indices_buf[:len(indices)]
        else:
            dev_indptr = indptr.to(self.device, non_blocking=non_blocking)
            dev_indices = indices.to(self.device, non_blocking=non_blocking)
            dev_last = last_page_len.to(self.device, non_blocking=non_blocking)
        if sm_scale is None:
            sm_scale = 1.0 / math.sqrt(head_dim)
        planned = dict(indptr=dev_indptr, indices=dev_indices, last_page_len=dev_last,
                       batch_size=batch_size, num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads,
                       head_dim=head_dim, page_size=page_size, dtype=q_dtype, kv_dtype=kv_dtype, variant=variant,
                       sm_scale=check_scale(fn, "sm_scale", sm_scale))
        # kindex's plan is made on the device from the page table, into the workspace: every run() until the next
        # plan() reads it, and a captured run() reads whatever the latest plan() wrote. run()'s own options
        # (k_scale, v_scale, sinks) are at their defaults here.
        ops.paged_decode_plan(dev_indptr, dev_indices, dev_last, q_dtype, num_qo_heads, num_kv_heads, head_dim,
                              page_size, self._float_workspace_buffer,
                              ops.FP8_KV_FORMATS.get(kv_dtype, _capi.KV_FORMAT_SAME_AS_Q), variant)
        self._planned = planned

    begin_forward = plan

    def run(self, q: torch.Tensor, paged_kv_cache: Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]],
            *args, q_scale: Optional[float] = None, k_scale: Optional[float] = None,
            v_scale: Optional[float] = None, out: Optional[torch.Tensor] = None,
            lse: Optional[torch.Tensor] = None, return_lse: bool = False, enable_pdl: Optional[bool] = None,
            window_left: Optional[int] = None, sinks: Optional[torch.Tensor] = None,
            q_len_per_req: Optional[int] = None, skip_softmax_threshold_scale_factor: Optional[float] = None,
            kv_cache_sf=None):
        """FlashInfer's run(): the attention output [batch_size * q_len_per_req, num_qo_heads, head_dim], and with
        return_lse=True also the base-2 lse [batch_size * q_len_per_req, num_qo_heads] (fp32). `out` and `lse` are
        written in place when given. q_scale is folded into sm_scale (q is fp16/bf16); k_scale and v_scale go to
        the kernel (kindex.h), which is what FlashInfer's folding of k_scale into sm_scale and `out *= v_scale`
        compute. enable_pdl is accepted and ignored."""
        fn = f"{_CLASS}.run"
        p = self._planned
        if p is None:
            raise RuntimeError(f"{fn}: plan() must be called before run()")
        if args:
            _unsupported("run", "*args", args, "kindex takes no custom-kernel arguments")
        for name, value, why in (("skip_softmax_threshold_scale_factor", skip_softmax_threshold_scale_factor,
                                  "kindex computes the full softmax"),
                                 ("kv_cache_sf", kv_cache_sf, "kindex has no NVFP4 KV cache")):
            if value is not None:
                _unsupported("run", name, _describe(value), why)
        variant = p["variant"]
        if window_left is not None and window_left != variant["window_left"]:
            raise ValueError(f"{fn}: window_left = {window_left!r}: must be None or plan()'s "
                             f"{variant['window_left']} (re-plan to change it)")
        if q_len_per_req is not None:
            warnings.warn(f"{fn}: q_len_per_req belongs to plan(); passing it to run() is deprecated (as in "
                          "FlashInfer)", DeprecationWarning, stacklevel=2)
            if q_len_per_req != variant["q_len_per_req"]:
                raise ValueError(f"{fn}: q_len_per_req = {q_len_per_req!r}: plan() used "
                                 f"{variant['q_len_per_req']}; re-plan with the matching q_len_per_req")
        k_cache, v_cache = self._unpack(fn, paged_kv_cache)
        if q.dtype != p["dtype"]:
            raise ValueError(f"{fn}: q has dtype {q.dtype}; the plan's q_data_type is {p['dtype']}")
        if k_cache.dtype != p["kv_dtype"]:
            raise ValueError(f"{fn}: paged_kv_cache has dtype {k_cache.dtype}; the plan's kv_data_type is "
                             f"{p['kv_dtype']}")
        rows = p["batch_size"] * variant["q_len_per_req"]
        expected = (rows, p["num_qo_heads"], p["head_dim"])
        if tuple(q.shape) != expected:
            raise ValueError(f"{fn}: q has shape {list(q.shape)}; the plan says {list(expected)} "
                             "[batch_size * q_len_per_req, num_qo_heads, head_dim]")
        heads_and_page = (p["num_kv_heads"], p["page_size"])
        if self._kv_layout == "NHD":
            heads_and_page = heads_and_page[::-1]
        if k_cache.dim() == 4 and tuple(k_cache.shape[1:3]) != heads_and_page:
            raise ValueError(f"{fn}: paged_kv_cache has shape {list(k_cache.shape)} per cache; the plan says "
                             f"page_size {p['page_size']} and {p['num_kv_heads']} KV heads ({self._kv_layout})")
        sm_scale = p["sm_scale"]
        if q_scale is not None:
            sm_scale *= check_scale(fn, "q_scale", q_scale)
        if k_scale is not None or v_scale is not None or sinks is not None:
            variant = dict(variant, sinks=sinks)
            for name, value in (("k_scale", k_scale), ("v_scale", v_scale)):
                variant[name] = check_positive(fn, name, value, 1.0)
        if out is None:
            out = torch.empty_like(q)
        if lse is None and return_lse:
            lse = torch.empty(tuple(q.shape[:2]), dtype=torch.float32, device=q.device)
        ops.paged_decode_run_into(q, k_cache, v_cache, p["indptr"], p["indices"], p["last_page_len"], sm_scale,
                                  out, lse, self._float_workspace_buffer, variant)
        return (out, lse) if return_lse else out

    run_return_lse = functools.partialmethod(run, return_lse=True)

    def forward(self, q, paged_kv_cache, pos_encoding_mode: str = "NONE", q_scale=None, k_scale=None, v_scale=None,
                window_left: int = -1, logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None):
        """Deprecated in FlashInfer (use run()); kept for its callers. The variant it names must be the plan's
        (kindex's device plan was made for it); sm_scale replaces the plan's."""
        fn = f"{_CLASS}.forward"
        planned = self._planned["variant"] if self._planned else ops.DEFAULT_VARIANT
        asked = ops.decode_variant(fn, self._kv_layout, None, None, planned["q_len_per_req"], window_left,
                                   logits_soft_cap, None, pos_encoding_mode, rope_scale, rope_theta)
        for name in ("window_left", "logits_soft_cap", "pos_encoding", "rope_scale", "rope_theta"):
            if asked[name] != planned[name]:
                raise ValueError(f"{fn}: {name} = {asked[name]!r} differs from plan()'s {planned[name]!r}: "
                                 "re-plan with it")
        if sm_scale is not None and self._planned:
            self._planned["sm_scale"] = check_scale(fn, "sm_scale", sm_scale)
        return self.run(q, paged_kv_cache, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale)

    def end_forward(self) -> None:
        """Deprecated in FlashInfer; nothing to release."""

    _warned_5d = False

    def _unpack(self, fn: str, paged_kv_cache):
        """FlashInfer's cache forms: (k_cache, v_cache) 4-D each (3-D: page_size 1), or one tensor with K and V in
        dimension 1, 5-D (4-D: page_size 1)."""
        page_dim = -3 if self._kv_layout == "NHD" else -2  # where FlashInfer inserts page_size 1
        if isinstance(paged_kv_cache, (tuple, list)):
            if len(paged_kv_cache) != 2:
                raise ValueError(f"{fn}: paged_kv_cache as a tuple must be (k_cache, v_cache), got "
                                 f"{len(paged_kv_cache)} items")
            return tuple(t.unsqueeze(page_dim) if torch.is_tensor(t) and t.dim() == 3 else t for t in paged_kv_cache)
        if torch.is_tensor(paged_kv_cache) and paged_kv_cache.dim() == 4:
            paged_kv_cache = paged_kv_cache.unsqueeze(page_dim)
        if not torch.is_tensor(paged_kv_cache) or paged_kv_cache.dim() != 5 or paged_kv_cache.shape[1] != 2:
            shape = list(paged_kv_cache.shape) if torch.is_tensor(paged_kv_cache) else type(paged_kv_cache).__name__
            inner = "page_size, num_kv_heads" if self._kv_layout == "NHD" else "num_kv_heads, page_size"
            raise ValueError(f"{fn}: paged_kv_cache is {shape}; expected (k_cache, v_cache) or one tensor "
                             f"[max_num_pages, 2, {inner}, head_dim] ({self._kv_layout})")
        # The interleaved layout puts K and V pages side by side; kindex reads each cache densely, so they are
        # copied out (a whole-cache copy per call: keep K and V apart to avoid it).
        if not BatchDecodeWithPagedKVCacheWrapper._warned_5d:
            BatchDecodeWithPagedKVCacheWrapper._warned_5d = True
            warnings.warn(f"{_CLASS}: a single-tensor paged_kv_cache is copied into separate K and V caches on every "
                          "run; pass (k_cache, v_cache) to avoid the copy", stacklevel=3)
        return paged_kv_cache[:, 0].contiguous(), paged_kv_cache[:, 1].contiguous()
