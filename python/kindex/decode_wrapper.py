"""A drop-in for flashinfer.BatchDecodeWithPagedKVCacheWrapper (FlashInfer 0.7.2) over kindex's paged decode.

Same constructor, plan() and run() contract for the configurations kindex supports: NHD layout, fp16/bf16 with
one dtype for q, KV and output, no positional encoding inside the kernel, no sliding window, no logit soft-cap,
one query token per request. Anything else raises NotImplementedError naming the argument, instead of
computing something else. The lse convention is FlashInfer's: base 2. The differences that remain are listed in
python/README.md.
"""

import math
import warnings
from typing import Optional, Tuple, Union

import torch

from . import ops
from ._checks import check_scale

_DTYPE_NAMES = {"float16": torch.float16, "half": torch.float16, "bfloat16": torch.bfloat16}


def _canonical_dtype(arg: str, value) -> torch.dtype:
    if isinstance(value, str):
        if value not in _DTYPE_NAMES:
            raise NotImplementedError(f"kindex.BatchDecodeWithPagedKVCacheWrapper.plan: {arg} = {value!r}: kindex "
                                      "supports float16 and bfloat16")
        return _DTYPE_NAMES[value]
    if value not in (torch.float16, torch.bfloat16):
        raise NotImplementedError(f"kindex.BatchDecodeWithPagedKVCacheWrapper.plan: {arg} = {value}: kindex "
                                  "supports torch.float16 and torch.bfloat16")
    return value


# plan() options of FlashInfer's: those accepted with the values kindex does anyway (it is deterministic, so
# disable_split_kv changes nothing), and those only accepted as None.
_PLAN_ACCEPTED = {"window_right": (0,), "q_len_per_req": (1, None), "is_causal": (None, False),
                  "disable_split_kv": (False, True)}
_PLAN_UNSUPPORTED = ("block_tables", "seq_lens", "fixed_split_size")


def _unsupported(method: str, arg: str, value, why: str):
    raise NotImplementedError(f"kindex.BatchDecodeWithPagedKVCacheWrapper.{method}: {arg} = {value!r}: {why}")


class BatchDecodeWithPagedKVCacheWrapper:
    """flashinfer.BatchDecodeWithPagedKVCacheWrapper's interface on kindex's kernel.

    float_workspace_buffer is kindex's split-KV scratch (it needs far less than FlashInfer's recommended
    128 MB; a buffer too small is reported at run, naming the size needed). With use_cuda_graph=True, plan()
    copies the page table into the given buffers, as FlashInfer does, so a captured run() reads the new values.
    """

    def __init__(self, float_workspace_buffer: torch.Tensor, kv_layout: str = "NHD", use_cuda_graph: bool = False,
                 use_tensor_cores: bool = False, paged_kv_indptr_buffer: Optional[torch.Tensor] = None,
                 paged_kv_indices_buffer: Optional[torch.Tensor] = None,
                 paged_kv_last_page_len_buffer: Optional[torch.Tensor] = None, backend: str = "auto",
                 jit_args=None) -> None:
        if kv_layout != "NHD":
            _unsupported("__init__", "kv_layout", kv_layout, "kindex reads NHD caches only")
        if jit_args is not None:
            _unsupported("__init__", "jit_args", "...", "kindex has no JIT variants")
        if not torch.is_tensor(float_workspace_buffer):
            raise ValueError("kindex.BatchDecodeWithPagedKVCacheWrapper: float_workspace_buffer must be a tensor")
        if use_cuda_graph:
            for name, buf in (("paged_kv_indptr_buffer", paged_kv_indptr_buffer),
                              ("paged_kv_indices_buffer", paged_kv_indices_buffer),
                              ("paged_kv_last_page_len_buffer", paged_kv_last_page_len_buffer)):
                if not torch.is_tensor(buf):
                    raise ValueError(f"kindex.BatchDecodeWithPagedKVCacheWrapper: {name} should be a torch.Tensor "
                                     "in cudagraph mode")
            if len(paged_kv_indptr_buffer) != len(paged_kv_last_page_len_buffer) + 1:
                raise ValueError("kindex.BatchDecodeWithPagedKVCacheWrapper: the size of paged_kv_indptr_buffer "
                                 "should be batch_size + 1")
            self._fixed_batch_size = len(paged_kv_last_page_len_buffer)
        else:
            self._fixed_batch_size = 0
        self._kv_layout = kv_layout
        self._float_workspace_buffer = float_workspace_buffer
        self.device = float_workspace_buffer.device
        self._use_cuda_graph = use_cuda_graph
        # kindex picks its own kernel; FlashInfer's tensor-core choice and backend have no counterpart here.
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
             **kwargs) -> None:
        """FlashInfer's plan(): the page table (int32, on any device) and the problem's sizes. Keyword options
        FlashInfer has and kindex does not (block_tables, seq_lens, fixed_split_size, q_len_per_req > 1, ...)
        raise NotImplementedError unless they ask for the default."""
        if pos_encoding_mode != "NONE":
            _unsupported("plan", "pos_encoding_mode", pos_encoding_mode, "kindex applies no positional encoding "
                         "inside attention (rotate q and k before the call)")
        if window_left != -1:
            _unsupported("plan", "window_left", window_left, "kindex has no sliding window")
        if logits_soft_cap not in (None, 0, 0.0):
            _unsupported("plan", "logits_soft_cap", logits_soft_cap, "kindex has no logit soft-cap")
        for name, value in kwargs.items():
            if name in _PLAN_ACCEPTED:
                if value not in _PLAN_ACCEPTED[name]:
                    _unsupported("plan", name, value, "kindex decodes one non-causal query token per request")
            elif name in _PLAN_UNSUPPORTED:
                if value is not None:
                    _unsupported("plan", name, value if not torch.is_tensor(value) else "tensor",
                                 "not supported by kindex")
            else:
                raise TypeError(f"kindex.BatchDecodeWithPagedKVCacheWrapper.plan: unexpected argument {name!r}")
        if data_type is not None:
            q_data_type = q_data_type if q_data_type not in (None, "float16") else data_type
            kv_data_type = kv_data_type if kv_data_type is not None else data_type
        q_dtype = _canonical_dtype("q_data_type", q_data_type if q_data_type is not None else "float16")
        kv_dtype = _canonical_dtype("kv_data_type", kv_data_type) if kv_data_type is not None else q_dtype
        o_dtype = _canonical_dtype("o_data_type", o_data_type) if o_data_type is not None else q_dtype
        if kv_dtype != q_dtype:
            _unsupported("plan", "kv_data_type", kv_dtype, f"kindex needs the KV dtype of q ({q_dtype})")
        if o_dtype != q_dtype:
            _unsupported("plan", "o_data_type", o_dtype, f"kindex writes the output in q's dtype ({q_dtype})")
        for name, t in (("indptr", indptr), ("indices", indices), ("last_page_len", last_page_len)):
            if not torch.is_tensor(t) or t.dtype != torch.int32 or t.dim() != 1:
                raise ValueError(f"kindex.BatchDecodeWithPagedKVCacheWrapper.plan: {name} must be a 1-D int32 "
                                 f"tensor, got {t.dtype if torch.is_tensor(t) else type(t).__name__}"
                                 f"{' of shape ' + str(list(t.shape)) if torch.is_tensor(t) else ''}")
        batch_size = len(last_page_len)
        if len(indptr) != batch_size + 1:
            raise ValueError(f"kindex.BatchDecodeWithPagedKVCacheWrapper.plan: indptr has {len(indptr)} entries; "
                             f"expected batch_size + 1 = {batch_size + 1} (batch_size from last_page_len)")
        if num_kv_heads < 1 or num_qo_heads % num_kv_heads:
            raise ValueError(f"kindex.BatchDecodeWithPagedKVCacheWrapper.plan: num_qo_heads = {num_qo_heads} must "
                             f"be a multiple of num_kv_heads = {num_kv_heads}")
        if self._use_cuda_graph:
            if batch_size != self._fixed_batch_size:
                raise ValueError(f"kindex.BatchDecodeWithPagedKVCacheWrapper.plan: the batch size {batch_size} "
                                 f"differs from the cudagraph buffers' {self._fixed_batch_size}")
            if len(indices) > len(self._indices_buf):
                raise ValueError(f"kindex.BatchDecodeWithPagedKVCacheWrapper.plan: {len(indices)} indices do not "
                                 f"fit paged_kv_indices_buffer ({len(self._indices_buf)})")
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
                       head_dim=head_dim, page_size=page_size, dtype=q_dtype,
                       sm_scale=check_scale("kindex.BatchDecodeWithPagedKVCacheWrapper.plan", "sm_scale", sm_scale))
        # kindex's plan is made on the device from the page table, into the workspace: every run() until the next
        # plan() reads it, and a captured run() reads whatever the latest plan() wrote.
        ops.paged_decode_plan(dev_indptr, dev_indices, dev_last, q_dtype, num_qo_heads,
                              num_kv_heads, head_dim, page_size, self._float_workspace_buffer)
        self._planned = planned

    begin_forward = plan

    def run(self, q: torch.Tensor, paged_kv_cache: Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]],
            *args, q_scale: Optional[float] = None, k_scale: Optional[float] = None,
            v_scale: Optional[float] = None, out: Optional[torch.Tensor] = None,
            lse: Optional[torch.Tensor] = None, return_lse: bool = False, enable_pdl: Optional[bool] = None,
            window_left: Optional[int] = None, sinks: Optional[torch.Tensor] = None,
            q_len_per_req: Optional[int] = None, **kwargs):
        """FlashInfer's run(): the attention output [batch_size, num_qo_heads, head_dim], and with
        return_lse=True also the base-2 lse [batch_size, num_qo_heads] (fp32). `out` and `lse` are written in
        place when given. enable_pdl is accepted and ignored (kindex launches one kernel)."""
        fn = "kindex.BatchDecodeWithPagedKVCacheWrapper.run"
        p = self._planned
        if p is None:
            raise RuntimeError(f"{fn}: plan() must be called before run()")
        if args:
            _unsupported("run", "*args", args, "kindex takes no custom-kernel arguments")
        if window_left not in (None, -1):
            _unsupported("run", "window_left", window_left, "kindex has no sliding window")
        if sinks is not None:
            _unsupported("run", "sinks", "tensor", "kindex has no attention sinks")
        if q_len_per_req not in (None, 1):
            _unsupported("run", "q_len_per_req", q_len_per_req, "kindex decodes one query token per request")
        for name, value in kwargs.items():
            if value is not None:
                _unsupported("run", name, value, "not supported by kindex")
        k_cache, v_cache = self._unpack(fn, paged_kv_cache)
        if q.dtype != p["dtype"]:
            raise ValueError(f"{fn}: q has dtype {q.dtype}; the plan's q_data_type is {p['dtype']}")
        expected = (p["batch_size"], p["num_qo_heads"], p["head_dim"])
        if tuple(q.shape) != expected:
            raise ValueError(f"{fn}: q has shape {list(q.shape)}; the plan says {list(expected)} "
                             "[batch_size, num_qo_heads, head_dim]")
        if k_cache.dim() == 4 and (k_cache.shape[1], k_cache.shape[2]) != (p["page_size"], p["num_kv_heads"]):
            raise ValueError(f"{fn}: paged_kv_cache has shape {list(k_cache.shape)} per cache; the plan says "
                             f"page_size {p['page_size']} and {p['num_kv_heads']} KV heads (NHD)")
        sm_scale = p["sm_scale"]
        if q_scale is not None:
            sm_scale *= check_scale(fn, "q_scale", q_scale)
        if k_scale is not None:
            sm_scale *= check_scale(fn, "k_scale", k_scale)
        if out is None:
            out = torch.empty_like(q)
        if lse is None:
            lse = torch.empty(tuple(q.shape[:2]), dtype=torch.float32, device=q.device)
        ops.paged_decode_run_into(q, k_cache, v_cache, p["indptr"], p["indices"], p["last_page_len"], sm_scale,
                                  out, lse, self._float_workspace_buffer)
        if v_scale is not None and check_scale(fn, "v_scale", v_scale) != 1.0:
            out *= v_scale
        return (out, lse) if return_lse else out

    def forward(self, q, paged_kv_cache, pos_encoding_mode: str = "NONE", q_scale=None, k_scale=None, v_scale=None,
                window_left: int = -1, logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None):
        """Deprecated in FlashInfer (use run()); kept for its callers."""
        if pos_encoding_mode != "NONE":
            _unsupported("forward", "pos_encoding_mode", pos_encoding_mode, "kindex applies no positional encoding")
        if sm_scale is not None:
            self._planned["sm_scale"] = check_scale("kindex.BatchDecodeWithPagedKVCacheWrapper.forward",
                                                    "sm_scale", sm_scale)
        return self.run(q, paged_kv_cache, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale,
                        window_left=window_left, logits_soft_cap=logits_soft_cap)

    def end_forward(self) -> None:
        """Deprecated in FlashInfer; nothing to release."""

    _warned_5d = False

    def _unpack(self, fn: str, paged_kv_cache):
        if isinstance(paged_kv_cache, (tuple, list)):
            if len(paged_kv_cache) != 2:
                raise ValueError(f"{fn}: paged_kv_cache as a tuple must be (k_cache, v_cache), got "
                                 f"{len(paged_kv_cache)} items")
            return paged_kv_cache[0], paged_kv_cache[1]
        if not torch.is_tensor(paged_kv_cache) or paged_kv_cache.dim() != 5 or paged_kv_cache.shape[1] != 2:
            shape = list(paged_kv_cache.shape) if torch.is_tensor(paged_kv_cache) else type(paged_kv_cache).__name__
            raise ValueError(f"{fn}: paged_kv_cache is {shape}; expected (k_cache, v_cache) or one tensor "
                             "[max_num_pages, 2, page_size, num_kv_heads, head_dim] (NHD)")
        # The interleaved layout puts K and V pages side by side; kindex reads each cache densely, so they are
        # copied out (a whole-cache copy per call: keep K and V apart to avoid it).
        if not BatchDecodeWithPagedKVCacheWrapper._warned_5d:
            BatchDecodeWithPagedKVCacheWrapper._warned_5d = True
            warnings.warn("kindex.BatchDecodeWithPagedKVCacheWrapper: a 5-D paged_kv_cache is copied into separate "
                          "K and V caches on every run; pass (k_cache, v_cache) to avoid the copy", stacklevel=3)
        return paged_kv_cache[:, 0].contiguous(), paged_kv_cache[:, 1].contiguous()
