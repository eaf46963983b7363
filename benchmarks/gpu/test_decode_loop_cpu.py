"""decode_loop.py on the CPU with tiny model configurations: the page bookkeeping (allocation, last_page_len,
appending) against a dense cache, the wrapper backend's plan-per-step / run-per-layer calls, determinism. Skipped
without torch (CI has none); the GPU run compares FlashInfer's wrapper with kindex's (decode_loop.py's main)."""
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import decode_loop as dl  # noqa: E402
import decode_reference as ref  # noqa: E402  (decode_loop put python/tests on the path)

LOOP = dict(batch=5, steps=10, page_size=4, seed=3, max_prompt=40, dtype=torch.float64, device="cpu")


def tokens_of(doc, name):
    entry = doc["backends"][name]
    assert entry["status"] == "ok", entry
    return entry["tokens"]


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-gemma"])
def test_paged_decode_loop_gives_the_dense_attentions_tokens(model):
    cfg = dl.MODELS[model]
    doc, rc = dl.run_loop(torch, cfg, ["dense", "reference"], **LOOP)
    assert rc == 0, doc
    assert doc["backends"]["reference"]["identical"] and doc["compared_with"] == "dense"
    assert max(doc["prompt_lengths"]) == 40 and len(set(doc["prompt_lengths"])) > 1
    if cfg.sliding_window:  # the window is exercised: prompts longer than it, and local and global layers
        assert max(doc["prompt_lengths"]) > cfg.sliding_window
        assert {cfg.window_left(layer) for layer in range(cfg.layers)} == {-1, cfg.sliding_window - 1}
    # Not a constant stream: the check would miss a broken cache otherwise.
    assert len({t for row in tokens_of(doc, "dense") for t in row}) > 5


def test_the_loop_is_deterministic():
    cfg = dl.MODELS["tiny-gemma"]
    first, _ = dl.run_loop(torch, cfg, ["reference"], **LOOP)
    again, _ = dl.run_loop(torch, cfg, ["reference"], **LOOP)
    assert tokens_of(first, "reference") == tokens_of(again, "reference")
    other, _ = dl.run_loop(torch, cfg, ["reference"], **dict(LOOP, seed=4))
    assert tokens_of(other, "reference") != tokens_of(first, "reference")


def test_a_wrong_last_page_len_is_caught(monkeypatch):
    # The comparison can fail: a table whose last pages are one token short gives other tokens.
    table = dl.PagedKVCache.table

    def short_last_page(self):
        indptr, indices, last = table(self)
        return indptr, indices, torch.clamp(last - 1, min=1)

    monkeypatch.setattr(dl.PagedKVCache, "table", short_last_page)
    doc, rc = dl.run_loop(torch, dl.MODELS["tiny-llama"], ["dense", "reference"], **LOOP)
    assert rc == 3 and not doc["backends"]["reference"]["identical"]
    d = doc["backends"]["reference"]["first_divergence"]
    assert set(d) == {"step", "request", "token", "other_token", "top2_margin"} and d["token"] != d["other_token"]


class RecordingWrapper:
    """FlashInfer's wrapper interface computed by decode_reference, recording plan() and run() calls."""

    calls = []

    def __init__(self, workspace, kv_layout):
        assert kv_layout == "NHD" and workspace.dtype == torch.uint8

    def plan(self, indptr, indices, last, heads, kv_heads, dim, page_size, **options):
        RecordingWrapper.calls.append(("plan", options["window_left"]))
        assert indptr.dtype == indices.dtype == last.dtype == torch.int32 and 1 <= int(last.min())
        assert int(last.max()) <= page_size and int(indptr[-1]) == len(indices)
        self.table = (indptr.tolist(), indices.tolist(), last.tolist())
        self.options = options

    def run(self, q, kv):
        RecordingWrapper.calls.append(("run", self.options["window_left"]))
        o = self.options
        assert o["q_data_type"] == o["kv_data_type"] == q.dtype
        out, _ = ref.reference_decode(q, kv[0], kv[1], *self.table, o["sm_scale"], window_left=o["window_left"],
                                      logits_soft_cap=o["logits_soft_cap"] or 0.0)
        return out.to(q.dtype)


def test_the_wrapper_backend_plans_once_per_step_and_runs_per_layer(monkeypatch):
    cfg = dl.MODELS["tiny-gemma"]
    RecordingWrapper.calls = []
    monkeypatch.setattr(dl, "make_backend", lambda torch, name, cfg, dtype, device: None if name == "dense" else
                        dl.WrapperBackend(torch, RecordingWrapper, cfg, dtype, device, workspace_bytes=16))
    doc, rc = dl.run_loop(torch, cfg, ["dense", "wrapper"], **LOOP)
    assert rc == 0 and doc["backends"]["wrapper"]["identical"], doc["backends"]["wrapper"]
    local, full = cfg.sliding_window - 1, -1
    per_step = [("plan", full), ("plan", local)] + [("run", cfg.window_left(layer)) for layer in range(cfg.layers)]
    assert RecordingWrapper.calls == per_step * LOOP["steps"]
    assert per_step[2:4] == [("run", local), ("run", full)]  # Gemma-2: layer 0 local, layer 1 global


def test_pages_are_allocated_scattered_and_last_page_len_follows_the_length():
    cfg = dl.MODELS["tiny-llama"]
    cache = dl.PagedKVCache(torch, cfg, 20, 4, torch.float32, "cpu", seed=0)
    a, b = cache.add_request(), cache.add_request()
    cache.append_slots(a, 5)  # 2 pages, last holds 1
    pages, slots = cache.append_slots(b, 4)  # 1 full page
    assert slots.tolist() == [0, 1, 2, 3] and len(set(pages.tolist())) == 1
    cache.append_slots(b, 1)  # a new page for the 5th token
    pages, slots = cache.append_slots(a, 3)  # fills a's second page
    assert slots.tolist() == [1, 2, 3]
    indptr, indices, last = cache.table()
    assert indptr.tolist() == [0, 2, 4] and last.tolist() == [4, 1] and cache.lengths == [8, 5]
    assert len(set(indices.tolist())) == 4 and indices.tolist() != sorted(indices.tolist())
    with pytest.raises(RuntimeError, match=r"out of pages \(20\): raise --pages"):
        cache.append_slots(a, 100)
