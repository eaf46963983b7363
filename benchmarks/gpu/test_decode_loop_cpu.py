"""decode_loop.py on the CPU with tiny model configurations: the page bookkeeping (allocation, last_page_len,
appending) against a dense cache, the wrapper backend's plan-per-step / run-per-layer calls, the untimed warm-up
(rolled back), teacher forcing and the logit comparison (near-ties against unexplained disagreements), determinism.
Skipped without torch (CI has none); the GPU run compares FlashInfer's wrapper with kindex's (decode_loop.py's
main)."""
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
    entry = doc["backends"]["reference"]
    assert rc == 3 and not entry["identical"] and entry["teacher_forced"]
    c = entry["comparison"]
    assert c["unexplained_disagreements"] > 0 and c["max_abs_logit_diff"] > 0.1
    assert c["compared"] == LOOP["batch"] * LOOP["steps"] == (c["argmax_agree"] + c["near_tie_disagreements"]
                                                               + c["unexplained_disagreements"])
    d = entry["first_divergence"]
    assert set(d) == {"step", "request", "token", "other_token", "margin", "top2_margin", "tolerance", "explained"}
    assert d["token"] != d["other_token"] and d["margin"] >= d["top2_margin"] >= 0


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
    doc, rc = dl.run_loop(torch, cfg, ["dense", "wrapper"], **LOOP, warmup_steps=2)
    assert rc == 0 and doc["backends"]["wrapper"]["identical"], doc["backends"]["wrapper"]
    local, full = cfg.sliding_window - 1, -1
    per_step = [("plan", full), ("plan", local)] + [("run", cfg.window_left(layer)) for layer in range(cfg.layers)]
    assert RecordingWrapper.calls == per_step * (2 + LOOP["steps"])  # 2 untimed warm-up steps, then the timed ones
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


def test_warm_up_steps_are_untimed_rolled_back_and_reported():
    cfg = dl.MODELS["tiny-llama"]
    cold, rc0 = dl.run_loop(torch, cfg, ["dense", "reference"], **LOOP, warmup_steps=0)
    warm, rc3 = dl.run_loop(torch, cfg, ["dense", "reference"], **LOOP, warmup_steps=3)
    assert rc0 == rc3 == 0 and warm["warmup_steps"] == 3
    for name in ("dense", "reference"):
        e = warm["backends"][name]
        assert tokens_of(warm, name) == tokens_of(cold, name)  # the warm-up left no trace in the cache
        assert len(e["warmup_step_s"]) == 3 and len(e["step_s"]) == LOOP["steps"] and e["construct_s"] >= 0
        assert e["setup_s"] == pytest.approx(e["construct_s"] + sum(e["warmup_step_s"]))
        assert e["seconds"] == pytest.approx(sum(e["step_s"]))
        assert e["tokens_per_s"] == pytest.approx(LOOP["batch"] * LOOP["steps"] / e["seconds"])
        assert e["step_ms"]["min"] <= e["step_ms"]["median"] <= e["step_ms"]["max"]
    assert cold["backends"]["dense"]["warmup_step_s"] == []
    c = warm["backends"]["reference"]["comparison"]
    assert c["argmax_agree"] == c["compared"] == LOOP["batch"] * LOOP["steps"] and not c["disagreements"]
    assert c["max_abs_logit_diff"] < 1e-3 and len(c["max_abs_logit_diff_per_step"]) == LOOP["steps"]


def test_other_backends_are_teacher_forced_on_the_baselines_tokens(monkeypatch):
    # A wrong table makes the second backend pick other tokens; it is still fed the baseline's, step by step.
    fed = []
    embed = dl.Model.embed_tokens
    monkeypatch.setattr(dl.Model, "embed_tokens", lambda self, tokens: fed.append(tokens.tolist()) or
                        embed(self, tokens))
    table = dl.PagedKVCache.table
    broken = {"on": False}

    def table_maybe_short(self):
        indptr, indices, last = table(self)
        return (indptr, indices, torch.clamp(last - 1, min=1)) if broken["on"] else (indptr, indices, last)

    monkeypatch.setattr(dl.PagedKVCache, "table", table_maybe_short)
    real_make = dl.make_backend

    def make(torch, name, cfg, dtype, device):
        broken["on"] = name == "reference"
        return real_make(torch, name, cfg, dtype, device)

    monkeypatch.setattr(dl, "make_backend", make)
    doc, rc = dl.run_loop(torch, dl.MODELS["tiny-llama"], ["dense", "reference"], **LOOP)
    assert rc == 3
    steps, first = LOOP["steps"], doc["first_tokens"]
    prompts = len(doc["prompt_lengths"])
    decode_calls = fed[prompts:]  # prefill embeds each prompt once; then warm-up + timed steps per backend
    dense_timed, ref_timed = decode_calls[1:1 + steps], decode_calls[2 + steps:]
    base = tokens_of(doc, "dense")
    expected = [first] + [[row[s] for row in base] for s in range(steps - 1)]
    assert dense_timed == expected and ref_timed == expected
    assert tokens_of(doc, "reference") != base  # its own argmax differs, but it never derailed the sequence


def test_compare_logits_tells_near_ties_from_real_disagreements():
    bf16 = torch.bfloat16
    assert float(dl.logit_spacing(torch, bf16, torch.tensor([5.0]))) == 2.0 ** -5  # [4, 8): 2^2 x 2^-7
    assert float(dl.logit_spacing(torch, bf16, torch.tensor([-0.7]))) == 2.0 ** -8
    base = [torch.tensor([[5.0, 4.96875, 1.0], [5.0, 3.0, 1.0], [2.0, 1.0, 0.0]])]
    other = [torch.tensor([[4.9, 5.0, 1.0], [3.0, 5.0, 1.0], [2.0, 1.5, 0.0]])]
    c = dl.compare_logits(torch, base, other, bf16, tie_ulps=4)
    assert (c["compared"], c["argmax_agree"], c["near_tie_disagreements"], c["unexplained_disagreements"]) == (
        3, 1, 1, 1)
    assert c["max_abs_logit_diff"] == 2.0
    near, wide = c["disagreements"]
    assert (near["request"], near["token"], near["other_token"], near["explained"]) == (0, 0, 1, True)
    assert near["margin"] == near["top2_margin"] == 0.03125 and near["tolerance"] == 4 * 2.0 ** -5
    assert (wide["request"], wide["margin"], wide["explained"]) == (1, 2.0, False)
    # the margin is to the token the other backend chose, not only the top-2 gap
    third = dl.compare_logits(torch, [torch.tensor([[5.0, 4.99, 4.0]])], [torch.tensor([[4.0, 4.0, 5.0]])], bf16, 4)
    assert third["unexplained_disagreements"] == 1 and third["disagreements"][0]["margin"] == 1.0
