"""kindex's torch.compile peer: the definition's own reference code (reference.py, its `run`) under
torch.compile(dynamic=False), the baseline T_b that SOL-ExecBench scores against, as a value-returning solution run
by kindex's solution worker.

`plan` (called by the worker untimed: for every workload in the runner's preparation, then once per round) compiles
for the call's shapes on first sight of them and makes one call, so compilation never lands in a timed call; `run`
calls the compiled code.

One static graph per shape (dynamic=False), as SOL-ExecBench's T_b: each new shape is a recompile of the same
compiled function, kept beside the earlier ones (dynamo keeps a guarded graph per shape and tries the last one used
first), so a shape compiled in the preparation is not compiled again in its runs, and nothing is reset. Inductor's
on-disk caches (FX graph, AOTAutograd and autotuning results, Triton kernels; under TORCHINDUCTOR_CACHE_DIR, by
default <temp dir>/torchinductor_<user>) make the next bench's compilations cache hits; kindex leaves them be.
"""
import torch

from .reference import run as reference

# A process compiles every workload's shapes; the recompile limit must not cut in and silently fall back to eager.
for _name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit", "accumulated_recompile_limit"):
    if hasattr(torch._dynamo.config, _name):
        setattr(torch._dynamo.config, _name, 4096)

_compiled = torch.compile(reference, dynamic=False)
_compiled_shapes = set()


def _shapes(args):
    return tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a for a in args)


def plan(*args):
    key = _shapes(args)
    if key not in _compiled_shapes:
        _compiled(*args)  # compiles this shape's graph (or loads it from Inductor's caches) and runs it once
        _compiled_shapes.add(key)


def run(*args):
    return _compiled(*args)
