"""kindex's torch.compile peer: the definition's own reference code (reference.py, its `run`) under
torch.compile(dynamic=False), the baseline T_b that SOL-ExecBench scores against, as a value-returning solution run
by kindex's solution worker.

`plan` (called by the worker once per round, untimed, its host time recorded) compiles for the round's shapes on
first sight of them and makes one call, so compilation never lands in a timed call; `run` calls the compiled code.
"""
import torch

from .reference import run as reference

_state = {}
# Every workload's shapes are compiled afresh (dynamic=False), as kindex's own T_b measurements do
# (benchmarks/gpu/backward_vs_torch.py); a process runs many workloads, so the recompile limit must not cut in and
# silently fall back to eager.
for _name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit", "accumulated_recompile_limit"):
    if hasattr(torch._dynamo.config, _name):
        setattr(torch._dynamo.config, _name, 4096)


def _shapes(args):
    return tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a for a in args)


def plan(*args):
    key = _shapes(args)
    if _state.get("key") != key:
        torch._dynamo.reset()
        _state["compiled"] = torch.compile(reference, dynamic=False)
        _state["key"] = key
        _state["compiled"](*args)


def run(*args):
    return _state["compiled"](*args)
