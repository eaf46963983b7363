"""CPU tests of benchmarks/gpu/decode_suite.py (ctest: decode_suite_cpu_tests): the safetensors reader, dataset
loading and its checks, the dense block table, the fp32 reference against a naive loop (on CPU tensors: the
reference is device-agnostic), ratios / summaries / merging / the markdown report, and the ctypes params helper.
Parts that need numpy or torch skip where those are not installed; the report logic needs neither."""

import ctypes
import json
import math
import pathlib
import struct
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import decode_suite as ds  # noqa: E402
import devbench as db  # noqa: E402

REPO = HERE.parents[1]
BUNDLED = REPO / "definitions/flashinfer-trace/definitions/gqa_paged"


# ------------------------------------------------------------------------------------------------------------------
# safetensors
# ------------------------------------------------------------------------------------------------------------------
def raw_safetensors(path, entries, metadata=None, pad=0):
    """A safetensors file written byte by byte here (independent of decode_suite.write_safetensors):
    entries [(name, dtype code, shape, bytes)]."""
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, code, shape, blob in entries:
        header[name] = {"dtype": code, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    text = json.dumps(header).encode() + b" " * pad
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def test_reader_reads_a_hand_made_file(tmp_path):
    np = pytest.importorskip("numpy")
    f = tmp_path / "t.safetensors"
    raw_safetensors(f, [("a", "I32", [3], struct.pack("<3i", 0, 5, -7)),
                        ("b", "F32", [2, 2], struct.pack("<4f", 1.5, 2, 3, 4)),
                        ("c", "I64", [], struct.pack("<q", 1 << 40))], metadata={"x": "y"}, pad=5)
    header, meta, start = ds.read_safetensors_header(f)
    assert meta == {"x": "y"} and set(header) == {"a", "b", "c"} and start == 8 + struct.unpack(
        "<Q", f.read_bytes()[:8])[0]
    got = ds.read_safetensors(f, use_library=False)
    assert got["a"].dtype == np.int32 and got["a"].tolist() == [0, 5, -7]
    assert got["b"].shape == (2, 2) and got["b"].tolist() == [[1.5, 2], [3, 4]]
    assert int(got["c"]) == 1 << 40
    assert list(ds.read_safetensors(f, ["a"], use_library=False)) == ["a"]


def test_writer_round_trips(tmp_path):
    np = pytest.importorskip("numpy")
    f = tmp_path / "w.safetensors"
    arrays = {"kv_indptr": np.array([0, 2, 5], np.int32), "x": np.arange(6, dtype=np.float32).reshape(2, 3),
              "m": np.array([True, False])}
    ds.write_safetensors(f, arrays, {"generator": "test"})
    header, meta, _ = ds.read_safetensors_header(f)
    assert header["kv_indptr"]["dtype"] == "I32" and meta == {"generator": "test"}
    got = ds.read_safetensors(f, use_library=False)
    for k, v in arrays.items():
        assert got[k].dtype == v.dtype and np.array_equal(got[k], v)


def test_reader_agrees_with_the_safetensors_package(tmp_path):
    np = pytest.importorskip("numpy")
    st = pytest.importorskip("safetensors.numpy")
    f = tmp_path / "lib.safetensors"
    st.save_file({"a": np.arange(10, dtype=np.int32), "b": np.ones((2, 3), np.float32)}, str(f))
    mine = ds.read_safetensors(f, use_library=False)
    lib = ds.read_safetensors(f, use_library=True)
    assert all(np.array_equal(mine[k], lib[k]) for k in ("a", "b"))


@pytest.mark.parametrize("mutate, message", [
    (lambda b: b[:4], "too short"),
    (lambda b: struct.pack("<Q", 10 ** 6) + b[8:], "runs past the end"),
    (lambda b: b[:8] + b"x" + b[9:], "not JSON"),
    (lambda b: b[:8] + b"[" + b[9:], "not JSON"),
    (lambda b: b[:-1], "data_offsets"),
])
def test_reader_rejects_malformed_files(tmp_path, mutate, message):
    f = tmp_path / "bad.safetensors"
    raw_safetensors(f, [("a", "I32", [2], struct.pack("<2i", 1, 2))])
    f.write_bytes(mutate(f.read_bytes()))
    with pytest.raises(ds.DatasetError, match=message):
        ds.read_safetensors_header(f)


def test_reader_rejects_unknown_dtype_and_missing_key(tmp_path):
    pytest.importorskip("numpy")
    f = tmp_path / "d.safetensors"
    raw_safetensors(f, [("a", "Q7", [1], b"\0")])
    with pytest.raises(ds.DatasetError, match="unknown dtype"):
        ds.read_safetensors_header(f)
    raw_safetensors(f, [("a", "I32", [1], b"\0" * 4)])
    with pytest.raises(ds.DatasetError, match="no tensor zz"):
        ds.read_safetensors(f, ["zz"], use_library=False)


# ------------------------------------------------------------------------------------------------------------------
# datasets
# ------------------------------------------------------------------------------------------------------------------
def make_dataset(root, np, spec):
    """A dataset as kindex catalog export writes it: spec {definition: [(indptr, indices, last or None,
    num_pages), ...]}; definitions copied from the bundled ones."""
    for name, workloads in spec.items():
        d = json.loads((BUNDLED / f"{name}.json").read_text())
        (root / "definitions/gqa_paged").mkdir(parents=True, exist_ok=True)
        (root / "definitions/gqa_paged" / f"{name}.json").write_text(json.dumps(d))
        lines = []
        for i, (indptr, indices, last, pages) in enumerate(workloads):
            uuid = f"uuid-{name}-{i}"
            blob = f"blob/kindex-page-tables/{name}/{uuid}.safetensors"
            tensors = {"kv_indptr": np.array(indptr, np.int32), "kv_indices": np.array(indices, np.int32)}
            if last is not None:
                tensors["kv_last_page_len"] = np.array(last, np.int32)
            ds.write_safetensors(root / blob, tensors, {"uuid": uuid})
            inputs = {"q": {"type": "random"}, "k_cache": {"type": "random"}, "v_cache": {"type": "random"}}
            for t in tensors:
                inputs[t] = {"type": "safetensors", "path": blob, "tensor_key": t}
            inputs["sm_scale"] = {"type": "scalar", "value": 0.125}
            axes = {"batch_size": len(indptr) - 1, "num_pages": pages, "len_indptr": len(indptr),
                    "num_kv_indices": len(indices)}
            lines.append(json.dumps({"definition": name, "solution": None,
                                     "workload": {"uuid": uuid, "axes": axes, "inputs": inputs},
                                     "evaluation": None}))
        (root / "workloads/gqa_paged").mkdir(parents=True, exist_ok=True)
        (root / "workloads/gqa_paged" / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    return root


PS1 = "gqa_paged_decode_h32_kv4_d128_ps1"
PS64 = "gqa_paged_decode_h24_kv4_d128_ps64"


def test_load_dataset_reads_cases_and_tables(tmp_path):
    np = pytest.importorskip("numpy")
    root = make_dataset(tmp_path / "seeds", np, {
        PS1: [([0, 2, 5], [3, 1, 0, 4, 2], None, 6), ([0, 1], [0], None, 1)],
        PS64: [([0, 2, 3], [7, 1, 5], [10, 64], 8)]})
    d = ds.load_dataset(root)
    assert d["name"] == "seeds" and d["definitions"] == [PS64, PS1]  # sorted by file name
    labels = [c["label"] for c in d["cases"]]
    assert labels == [f"{PS64}#0", f"{PS1}#0", f"{PS1}#1"]
    c = d["cases"][0]
    assert (c["hq"], c["hkv"], c["d"], c["ps"], c["batch_size"], c["num_pages"], c["num_kv_indices"]) == \
        (24, 4, 128, 64, 2, 8, 3)
    assert c["sm_scale"] == 0.125 and c["uuid"] == f"uuid-{PS64}-0"
    indptr, indices, last = ds.load_tables(c)
    assert indptr.tolist() == [0, 2, 3] and indices.tolist() == [7, 1, 5] and last.tolist() == [10, 64]
    indptr, indices, last = ds.load_tables(d["cases"][1])
    assert "kv_last_page_len" not in d["cases"][1]["tables"] and last.tolist() == [1, 1]
    tokens, rows, nbytes = ds.kv_geometry(indptr, indices, last, d["cases"][1])
    assert (tokens, rows) == (5, 5) and nbytes == 5 * 4 * 128 * 4 + 2 * 2 * 32 * 128 * 2 + 2 * 32 * 4
    assert [c["label"] for c in ds.select_cases(d["cases"], r"ps1#1$")] == [f"{PS1}#1"]
    assert len(ds.select_cases(d["cases"], "ps1", max_cases=1)) == 1
    both = ds.load_datasets([root, root])
    assert [x["name"] for x in both] == ["seeds", "seeds#2"]


def test_load_dataset_rejects_what_it_cannot_run(tmp_path):
    np = pytest.importorskip("numpy")
    root = make_dataset(tmp_path / "a", np, {PS1: [([0, 2], [0, 1], None, 2)]})
    wl = root / "workloads/gqa_paged" / f"{PS1}.jsonl"
    good = wl.read_text()
    rec = json.loads(good)
    rec["workload"]["inputs"]["kv_indices"] = {"type": "random"}
    wl.write_text(json.dumps(rec))
    with pytest.raises(ds.DatasetError, match="kindex catalog export"):
        ds.load_dataset(root)
    rec = json.loads(good)
    rec["workload"]["axes"]["num_kv_indices"] = 3  # the file holds 2
    wl.write_text(json.dumps(rec))
    with pytest.raises(ds.DatasetError, match=r"want I32 \[3\]"):
        ds.load_dataset(root)
    rec = json.loads(good)
    rec["workload"]["inputs"]["q"] = {"type": "safetensors", "path": "x", "tensor_key": "q"}
    wl.write_text(json.dumps(rec))
    with pytest.raises(ds.DatasetError, match="input 'q'"):
        ds.load_dataset(root)
    with pytest.raises(ds.DatasetError, match="no definitions/gqa_paged"):
        ds.load_dataset(tmp_path / "nothing")


def test_load_tables_checks_values(tmp_path):
    np = pytest.importorskip("numpy")
    root = make_dataset(tmp_path / "b", np, {PS64: [([0, 2, 3], [7, 1, 9], [10, 64], 8)],
                                             PS1: [([0, 2, 1], [0], None, 2)]})
    d = ds.load_dataset(root)
    with pytest.raises(ds.DatasetError, match=r"kv_indices\[2\] = 9 outside"):
        ds.load_tables(d["cases"][0])
    with pytest.raises(ds.DatasetError, match="decreases"):
        ds.load_tables(d["cases"][1])


def test_torch_decode_baselines_tables_still_load(tmp_path):
    np = pytest.importorskip("numpy")
    import torch_decode_baselines as tdb
    case = {"label": "h24_kv4_d128_ps64#0", "batch_size": 2, "ps": 64, "num_pages": 8, "num_kv_indices": 3}
    for suffix, values in ((".indptr", [0, 2, 3]), (".indices", [7, 1, 5]), (".last", [10, 64])):
        (tmp_path / (case["label"] + suffix)).write_bytes(np.array(values, "<i4").tobytes())
    indptr, indices, last = tdb.load_tables(tmp_path, case)
    assert indptr.tolist() == [0, 2, 3] and indices.tolist() == [7, 1, 5] and last.tolist() == [10, 64]
    (tmp_path / (case["label"] + ".last")).write_bytes(np.array([0, 64], "<i4").tobytes())
    with pytest.raises(tdb.TableError, match=r"kv_last_page_len\[0\] = 0"):
        tdb.load_tables(tmp_path, case)


def test_case_seed_depends_on_seed_and_label_only():
    assert ds.case_seed(1, "a#0") == ds.case_seed(1, "a#0")
    assert len({ds.case_seed(1, "a#0"), ds.case_seed(2, "a#0"), ds.case_seed(1, "a#1")}) == 3
    assert 0 <= ds.case_seed(123456789, "x" * 100) < 1 << 62


# ------------------------------------------------------------------------------------------------------------------
# page-table geometry
# ------------------------------------------------------------------------------------------------------------------
def test_block_table_and_lengths():
    np = pytest.importorskip("numpy")
    indptr, indices = [0, 3, 3, 4, 6], [5, 2, 9, 1, 0, 7]
    t = ds.block_table(indptr, indices)
    assert t.dtype == np.int32 and t.tolist() == [[5, 2, 9], [0, 0, 0], [1, 0, 0], [0, 7, 0]]
    assert ds.block_table(indptr, indices, width=5).shape == (4, 5)
    with pytest.raises(ValueError, match="width 2"):
        ds.block_table(indptr, indices, width=2)
    assert ds.block_table([0, 0], []).tolist() == [[0]]  # all empty: one padded column
    lens = ds.sequence_lengths(indptr, [4, 1, 16, 2], 16)
    assert lens.tolist() == [2 * 16 + 4, 0, 16, 16 + 2]


# ------------------------------------------------------------------------------------------------------------------
# the fp32 reference against a naive loop (CPU tensors)
# ------------------------------------------------------------------------------------------------------------------
def naive_decode(q, k_cache, v_cache, indptr, indices, last, sm_scale):
    """Per sequence, per head, in float64: lists of token rows, softmax, weighted sum; lse base 2."""
    import torch
    b, hq, d = q.shape
    _, ps, hkv, _ = k_cache.shape
    g = hq // hkv
    out = torch.zeros(b, hq, d, dtype=torch.float64)
    lse = torch.full((b, hq), -math.inf, dtype=torch.float64)
    for s in range(b):
        pages = indices[indptr[s]:indptr[s + 1]]
        toks = []
        for j, p in enumerate(pages):
            n = last[s] if j == len(pages) - 1 else ps
            toks += [(p, o) for o in range(n)]
        if not toks:
            continue
        for h in range(hq):
            kh = h // g
            logits = torch.tensor([float((q[s, h].double() * k_cache[p, o, kh].double()).sum()) * sm_scale
                                   for p, o in toks], dtype=torch.float64)
            mx = logits.max()
            w = torch.exp(logits - mx)
            lse[s, h] = (mx + torch.log(w.sum())) / math.log(2.0)
            vs = torch.stack([v_cache[p, o, kh].double() for p, o in toks])
            out[s, h] = (w[:, None] * vs).sum(0) / w.sum()
    return out, lse


def random_case(torch, np, seed, batch, hq, hkv, d, ps, pages, empty=(), shared=True):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 6, size=batch)
    for e in empty:
        counts[e] = 0
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    indices = rng.integers(0, pages, size=int(indptr[-1])).astype(np.int32)
    if shared and len(indices) > 2:
        indices[0] = indices[-1]  # a page shared by two sequences
    last = rng.integers(1, ps + 1, size=batch).astype(np.int32) if ps > 1 else np.ones(batch, np.int32)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, hq, d, generator=g)
    k = torch.randn(pages, ps, hkv, d, generator=g)
    v = torch.randn(pages, ps, hkv, d, generator=g)
    return q, k, v, indptr, indices, last


@pytest.mark.parametrize("batch, hq, hkv, d, ps, pages, empty", [
    (4, 8, 2, 16, 1, 20, ()),
    (5, 6, 1, 8, 4, 12, (2,)),
    (3, 4, 4, 32, 16, 6, ()),
])
@pytest.mark.parametrize("budget", [1 << 30, 2 * 16 * 4 * 3])
def test_reference_matches_naive_loop(batch, hq, hkv, d, ps, pages, empty, budget):
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    q, k, v, indptr, indices, last = random_case(torch, np, batch * 7 + ps, batch, hq, hkv, d, ps, pages, empty)
    sm_scale = 1 / math.sqrt(d)
    # fp32 inputs: the reference's output stays fp32, so it can be held to float64 closely
    out, lse = ds.reference_decode(q, k, v, indptr, torch.from_numpy(indices), last, sm_scale,
                                   budget_bytes=budget)
    want_out, want_lse = naive_decode(q, k, v, indptr.tolist(), indices.tolist(), last.tolist(), sm_scale)
    assert out.dtype == torch.float32 and lse.dtype == torch.float32
    assert torch.allclose(out.double(), want_out, atol=1e-5, rtol=1e-5)
    finite = torch.isfinite(want_lse)
    assert torch.equal(torch.isfinite(lse), finite)
    assert torch.allclose(lse.double()[finite], want_lse[finite], atol=1e-5, rtol=1e-5)
    for e in empty:
        assert bool((out[e] == 0).all()) and bool(torch.isinf(lse[e]).all() and (lse[e] < 0).all())


def test_reference_rounds_to_the_inputs_dtype_and_passes_the_comparator():
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    q, k, v, indptr, indices, last = random_case(torch, np, 3, 6, 8, 2, 64, 4, 40)
    qb, kb, vb = q.bfloat16(), k.bfloat16(), v.bfloat16()
    out, lse = ds.reference_decode(qb, kb, vb, indptr, torch.from_numpy(indices), last, 0.1, budget_bytes=4096)
    assert out.dtype == torch.bfloat16
    want_out, want_lse = naive_decode(qb, kb, vb, indptr.tolist(), indices.tolist(), last.tolist(), 0.1)
    assert db.compare_fib(out, want_out.float(), "output", **ds.FIB_TOLERANCE)["passed"]
    assert db.compare_fib(lse, want_lse.float(), "lse", **ds.FIB_TOLERANCE)["passed"]
    wrong = out.clone()
    wrong[0, 0, 0] += 1
    assert not db.compare_fib(wrong, want_out.float(), "output", **ds.FIB_TOLERANCE)["passed"]


def test_reference_long_sequence_is_chunked():
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    # one 600-token sequence next to short ones, tokens in chunks of 8 (budget 8 rows of hkv*d fp32)
    batch, hq, hkv, d, ps = 3, 4, 2, 8, 1
    counts = [600, 3, 1]
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    rng = np.random.default_rng(5)
    indices = rng.integers(0, 700, size=int(indptr[-1])).astype(np.int32)
    last = np.ones(batch, np.int32)
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(*s, generator=g) for s in ((batch, hq, d), (700, ps, hkv, d), (700, ps, hkv, d)))
    small = ds.reference_decode(q, k, v, indptr, torch.from_numpy(indices), last, 0.3, budget_bytes=8 * hkv * d * 4)
    big = ds.reference_decode(q, k, v, indptr, torch.from_numpy(indices), last, 0.3, budget_bytes=1 << 30)
    assert torch.allclose(small[0], big[0], atol=1e-6) and torch.allclose(small[1], big[1], atol=1e-5)
    want_out, want_lse = naive_decode(q, k, v, indptr.tolist(), indices.tolist(), last.tolist(), 0.3)
    assert torch.allclose(small[0].double(), want_out, atol=1e-5)


# ------------------------------------------------------------------------------------------------------------------
# limits, params
# ------------------------------------------------------------------------------------------------------------------
def test_known_limits():
    case = {"hq": 40, "hkv": 8, "d": 128, "ps": 1}
    assert "group sizes" in ds.known_limits("flashinfer_cuda", case, "9.0")
    assert ds.known_limits("flashinfer_tc", case, "9.0") is None
    assert "page sizes" in ds.known_limits("flashinfer_xqa", case, "9.0")
    assert ds.known_limits("flashinfer_xqa", dict(case, ps=16), "9.0") is None
    assert "sm_90a" in ds.known_limits("fa3", case, "8.0")
    assert "head_dim" in ds.known_limits("fa3", dict(case, d=96), "9.0")
    assert ds.known_limits("kindex", dict(case, hq=32), "9.0") is None
    assert "head_dim" in ds.known_limits("kindex", dict(case, d=80), "9.0")
    # --sinks: FlashInfer's CUDA-core decode cannot, its AttentionSink variant can but without soft-cap or RoPE
    sinks = dict(ds.DEFAULT_VARIANT, sinks=True, window=127)
    case = {"hq": 32, "hkv": 8, "d": 128, "ps": 16, "variant": sinks}
    assert ds.known_limits("flashinfer_cuda", case, "9.0") == ds.FLASHINFER_SINK_LIMITS["flashinfer_cuda"]
    assert ds.known_limits("flashinfer_tc", case, "9.0") is None and ds.known_limits("kindex", case, "9.0") is None
    assert "soft-cap" in ds.known_limits("flashinfer_tc", dict(case, variant=dict(sinks, soft_cap=50.0)), "9.0")
    assert "RoPE" in ds.known_limits("flashinfer_tc", dict(case, variant=dict(sinks, rope=True)), "9.0")
    assert ds.known_limits("flashinfer_cuda", dict(case, variant=dict(sinks, sinks=False)), "9.0") is None


def test_paged_decode_params_mirror_the_tensors():
    torch = pytest.importorskip("torch")
    q = torch.zeros(3, 8, 64, dtype=torch.bfloat16)
    k = torch.zeros(10, 16, 2, 64, dtype=torch.bfloat16)
    v = torch.zeros_like(k)
    indptr = torch.tensor([0, 1, 2, 4], dtype=torch.int32)
    indices = torch.tensor([1, 2, 3, 4], dtype=torch.int32)
    last = torch.tensor([3, 16, 1], dtype=torch.int32)
    out, lse = torch.empty_like(q), torch.empty(3, 8)
    p = db.paged_decode_params(q, k, v, indptr, indices, last, 0.5, out, lse)
    assert p.struct_size == ctypes.sizeof(db.PagedDecodeParams)
    assert (p.batch_size, p.num_qo_heads, p.num_kv_heads, p.head_dim, p.page_size, p.num_pages,
            p.num_kv_indices) == (3, 8, 2, 64, 16, 10, 4)
    assert p.dtype == db.KINDEX_DTYPE_BF16 and abs(p.sm_scale - 0.5) < 1e-7 and p.validate == 0
    assert (p.q, p.k_cache, p.v_cache, p.output, p.lse) == (q.data_ptr(), k.data_ptr(), v.data_ptr(),
                                                            out.data_ptr(), lse.data_ptr())
    assert (p.kv_indptr, p.kv_indices, p.kv_last_page_len) == (indptr.data_ptr(), indices.data_ptr(),
                                                               last.data_ptr())
    p = db.paged_decode_params(q.half(), k.half(), v.half(), indptr, indices, None, 1, out.half(), None)
    assert p.dtype == db.KINDEX_DTYPE_FP16 and p.kv_last_page_len is None and p.lse is None


# ------------------------------------------------------------------------------------------------------------------
# ratios, summaries, merging, report (no numpy, no torch)
# ------------------------------------------------------------------------------------------------------------------
def timed(us, passed=True, lse=True):
    return {"status": "ok", "median_us": us, "p05_us": us * 0.98, "p95_us": us * 1.05, "ratio_to_floor": us / 10,
            "achieved_tb_per_s": 1.0, "correctness": {"passed": passed, "reason": "ok" if passed else "bad",
                                                       "lse_checked": lse}}


def row(label, impls, dataset="seeds", uuid=None):
    return {"dataset": dataset, "definition": label.split("#")[0], "label": label, "uuid": uuid or label,
            "seed": ds.case_seed(1, label), "status": "done", "batch_size": 4, "kv_tokens": 100, "bytes": 2e6,
            "floor_us": 10.0, "impls": impls}


def test_derive_uses_only_correct_peers():
    r = ds.derive(row("a#0", {"kindex": timed(10), "flashinfer_tc": timed(12), "fa3": timed(8, passed=False),
                              "flashinfer_cuda": {"status": "unsupported: group"}}))
    assert r["best_peer"] == "flashinfer_tc" and r["ratio_kindex_vs_best"] == pytest.approx(10 / 12)
    assert r["ratio_kindex_vs_flashinfer_tc"] == pytest.approx(10 / 12)
    assert "ratio_kindex_vs_fa3" not in r and "ratio_kindex_vs_flashinfer_cuda" not in r
    r["impls"]["fa3"] = timed(8)
    ds.derive(r)
    assert r["best_peer"] == "fa3" and r["ratio_kindex_vs_best"] == pytest.approx(10 / 8)
    nok = ds.derive(row("a#1", {"flashinfer_tc": timed(5)}))
    assert nok["best_peer"] == "flashinfer_tc" and "ratio_kindex_vs_best" not in nok


def test_summary_counts_and_worst_cases():
    rows = [ds.derive(row(f"d#{i}", {"kindex": timed(10 + i), "kindex_plan": timed(2),
                                     "flashinfer_tc": timed(12), "flashinfer_cuda": timed(11, passed=i != 2),
                                     "flashinfer_xqa": {"status": "unsupported: XQA takes page sizes 16..",
                                                        "error": "ValueError"}}))
            for i in range(4)]
    rows.append(dict(row("d#9", {}), status="skipped: needs 90 GiB"))
    rows.append(ds.derive(row("e#0", {"kindex": timed(5), "fa3": timed(10)}, dataset="model")))
    impls = {"kindex": {"status": "ok"}, "tileops": {"status": "not installed: no module"}}
    s = ds.summarize(rows, impls)
    o = s["overall"]
    assert o["cases"] == 6 and o["done"] == 5 and list(o["skipped"]) == ["d#9"]
    kb = o["kindex_vs_best"]
    assert kb["of"] == 5 and kb["faster"] == 2  # d#0 (10 / 11), e#0 (5 / 10)
    assert kb["worst"][0]["label"] == "d#3" and kb["worst"][0]["ratio"] == pytest.approx(13 / 11)
    assert o["kindex_vs"]["flashinfer_tc"]["of"] == 4 and o["kindex_vs"]["fa3"]["faster"] == 1
    assert o["impls"]["flashinfer_cuda"]["comparator_failed"] == ["d#2"]
    assert o["impls"]["flashinfer_xqa"]["unsupported"] == {"unsupported: XQA takes page sizes 16..": 4}
    assert set(s["datasets"]) == {"seeds", "model"} and s["datasets"]["model"]["kindex_vs_best"]["of"] == 1
    assert s["peers_unavailable"] == {"tileops": {"status": "not installed: no module"}}
    text = ds.report({"cases": rows, "summary": s, "implementations": impls})
    assert "### seeds" in text and "### model" in text and "| d#3 |" in text
    assert "tileops could not run: not installed: no module" in text
    assert "comparator failed on 1 of 4" in text and "skipped: needs 90 GiB" in text


def test_merge_joins_a_tileops_file_by_case():
    main_doc = {"command": "main", "implementations": {"kindex": {"status": "ok"}, "flashinfer_tc": {"status": "ok"}},
                "cases": [ds.derive(row("d#0", {"kindex": timed(10), "flashinfer_tc": timed(12)})),
                          ds.derive(row("d#1", {"kindex": timed(10), "flashinfer_tc": timed(9)}))]}
    tl_doc = {"command": "tileops", "implementations": {"tileops": {"status": "ok"}},
              "cases": [row("d#0", {"tileops": timed(8)}), row("d#1", {"tileops": timed(20, passed=False)}),
                        row("d#2", {"tileops": timed(3)})]}
    merged = ds.merge([main_doc, tl_doc])
    by = {r["label"]: r for r in merged["cases"]}
    assert set(by) == {"d#0", "d#1", "d#2"}
    assert by["d#0"]["best_peer"] == "tileops" and by["d#0"]["ratio_kindex_vs_tileops"] == pytest.approx(10 / 8)
    assert by["d#1"]["best_peer"] == "flashinfer_tc" and "ratio_kindex_vs_tileops" not in by["d#1"]
    assert "ratio_kindex_vs_best" not in by["d#2"]
    assert merged["implementations"]["tileops"]["status"] == "ok" and merged["merged_from"] == ["main", "tileops"]
    assert main_doc["cases"][0]["impls"].keys() == {"kindex", "flashinfer_tc"}  # inputs untouched
    assert merged["summary"]["overall"]["kindex_vs"]["tileops"]["of"] == 1
    # a different workload under the same label, or other seeds: warned, not joined silently
    other = {"cases": [dict(row("d#0", {"tileops": timed(1)}), uuid="zzz"), dict(row("d#1", {}), seed=5)]}
    warned = ds.merge([main_doc, other])
    assert any("not the same workload" in w for w in warned["merge_warnings"])
    assert any("different inputs" in w for w in warned["merge_warnings"])
    assert {r["label"]: r for r in warned["cases"]}["d#0"]["impls"].keys() == {"kindex", "flashinfer_tc"}


def test_report_command_merges_files(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"cases": [row("d#0", {"kindex": timed(10)})], "implementations": {}}))
    b.write_text(json.dumps({"cases": [row("d#0", {"tileops": timed(20)})], "implementations": {}}))
    assert ds.main(["--report", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "| d#0 |" in out and "0.500" in out and "TileOPs" in out


def test_progress_line():
    r = ds.derive(row("gqa_paged_decode_h32_kv4_d128_ps1#3",
                      {"kindex": timed(10), "fa3": timed(12, passed=False), "flashinfer_cuda": {"status": "error: x"}}))
    line = ds.progress_line(r, 1, 2)
    assert "h32_kv4_d128_ps1#3" in line and "kindex 10.00" in line and "fa3 12.00 FAIL" in line
    assert "flashinfer_cuda error" in line
    assert "skipped" in ds.progress_line(dict(r, status="skipped: x"), 2, 2)


def test_arguments():
    with pytest.raises(SystemExit):
        ds.parse_args(["--dataset", "x", "--out", "o.json", "--impls", "tileops,flashinfer_tc"])
    with pytest.raises(SystemExit):
        ds.parse_args(["--dataset", "x", "--out", "o.json"])  # kindex without --lib
    with pytest.raises(SystemExit):
        ds.parse_args(["--dataset", "x", "--out", "o.json", "--impls", "nope"])
    a = ds.parse_args(["--dataset", "x", "--dataset", "y", "--out", "o.json", "--impls", "tileops", "--quick"])
    assert a.impls == ["tileops"] and a.dataset == ["x", "y"] and (a.warmup, a.iters) == (3, 10)
    a = ds.parse_args(["--dataset", "x", "--out", "o.json", "--lib", "l.so"])
    assert a.impls == list(ds.DEFAULT_IMPLS) and "tileops" not in a.impls


def test_main_checks_the_dataset_before_the_gpu(tmp_path, capsys):
    assert ds.main(["--dataset", str(tmp_path / "missing"), "--out", str(tmp_path / "o.json"),
                    "--impls", "fa3"]) == 1
    assert "no definitions/gqa_paged" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------------------------
# run_case / main driven on the CPU with stand-in implementations (the machinery: checks, statuses, exit codes,
# --resume, the JSON), torch.cuda's calls stubbed
# ------------------------------------------------------------------------------------------------------------------
class GatherImpl(ds.Impl):
    """A correct stand-in: dense block table + lengths (CaseTensors.table / seq_lens), fp32 softmax."""

    def __init__(self, ctx, case, t, with_lse=True, lazy=False):
        super().__init__(ctx, case, t)
        self.lse, self.lazy, self.calls = with_lse, lazy, 0
        self.out = self.torch.empty_like(t.q)
        self.lse_buf = self.torch.empty(case["batch_size"], case["hq"])
        self.info = {"stand_in": True}

    def call(self):
        torch, t, c = self.torch, self.t, self.case
        self.calls += 1
        if self.lazy and self.calls > 1:
            return self.out, self.lse_buf  # writes nothing after the first call: the poisoned buffers stay NaN
        table, ps, g = t.table().long(), c["ps"], c["hq"] // c["hkv"]
        kf = t.k_cache.reshape(-1, c["hkv"], c["d"]).float()
        vf = t.v_cache.reshape(-1, c["hkv"], c["d"]).float()
        for b in range(c["batch_size"]):
            n = int(t.seq_lens[b])
            tok = torch.arange(n)
            rows = table[b, tok // ps] * ps + tok % ps
            k = kf[rows].repeat_interleave(g, dim=1)  # [n, hq, d]
            logits = torch.einsum("hd,nhd->hn", t.q[b].float(), k) * c["sm_scale"]
            self.lse_buf[b] = torch.logsumexp(logits, -1) / math.log(2)
            self.out[b] = torch.einsum("hn,nhd->hd", torch.softmax(logits, -1),
                                       vf[rows].repeat_interleave(g, dim=1)).to(self.out.dtype)
        return self.out, self.lse_buf


class FailingImpl(ds.Impl):
    def __init__(self, ctx, case, t, message):
        super().__init__(ctx, case, t)
        raise RuntimeError(message)


class FakeCtx:
    def __init__(self, torch, impls):
        self.torch, self.capability = torch, "9.0"
        self.status = {n: ("not installed: stand-in" if n == "tileops" else "ok") for n in impls}
        self.meta = {}

    def ok(self, name):
        return self.status.get(name) == "ok"


class FakeTimer:
    spin_cycles = 0

    def time(self, fn, warmup, iters):
        fn()
        return dict(db.summarize([10.0, 11.0, 12.0]), warmup=warmup, launch_covered=1.0)

    def protocol(self):
        return {"timer": "stand-in"}


def fake_make_impl(name, ctx, case, t, args):
    if name == "kindex":
        return GatherImpl(ctx, case, t)
    if name == "flashinfer_tc":
        return GatherImpl(ctx, case, t, with_lse=False)
    if name == "fa3":
        return GatherImpl(ctx, case, t, lazy=True)
    if name == "flashinfer_cuda":
        return FailingImpl(ctx, case, t, "Unsupported group_size: 5")
    return FailingImpl(ctx, case, t, "boom")


@pytest.fixture
def cpu_run(monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    monkeypatch.setattr(ds, "DEVICE", "cpu")
    monkeypatch.setattr(ds, "make_impl", fake_make_impl)
    for fn in ("synchronize", "empty_cache"):
        monkeypatch.setattr(torch.cuda, fn, lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (64 << 30, 80 << 30))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(ds, "Context", lambda args: FakeCtx(torch, args.impls))
    monkeypatch.setattr(db, "DeviceTimer", lambda spin_us: FakeTimer())
    monkeypatch.setattr(db, "measure_copy_rate", lambda: {"bytes_per_s": 2e12})
    monkeypatch.setattr(db, "device_info", lambda: {"name": "stand-in", "capability": "9.0", "torch": "x"})
    h20 = "gqa_paged_decode_h20_kv4_d128_ps64"  # group 5: FlashInfer's CUDA-core decode refuses it
    root = make_dataset(tmp_path / "seeds", np, {
        h20: [([0, 2, 3], [4, 1, 4], [10, 64], 6), ([0, 1], [2], [5], 3)],
        PS1: [([0, 3, 5], [0, 1, 2, 3, 0], None, 4)]})
    return torch, root


def test_run_case_records_statuses_and_checks(cpu_run):
    torch, root = cpu_run
    case = next(c for c in ds.load_dataset(root)["cases"] if c["label"].endswith("ps64#0"))
    args = ds.parse_args(["--dataset", str(root), "--out", "x.json", "--lib", "l.so", "--impls",
                          "kindex,flashinfer_tc,fa3,flashinfer_cuda,flashinfer_xqa"])
    r = ds.run_case(FakeCtx(torch, args.impls), case, args, FakeTimer(), 2e12)
    assert r["status"] == "done" and r["kv_tokens"] == 64 + 10 + 64 and r["max_seq_len"] == 74
    assert r["kv_rows_unique"] == 64 + 10  # page 4 is shared by both sequences, counted once
    im = r["impls"]
    assert im["kindex"]["status"] == "ok" and im["kindex"]["correctness"]["passed"]
    assert im["kindex"]["correctness"]["lse_checked"] and not im["flashinfer_tc"]["correctness"]["lse_checked"]
    assert im["kindex"]["median_us"] == 11.0 and im["kindex"]["ratio_to_floor"] == pytest.approx(11.0 / r["floor_us"])
    assert not im["fa3"]["correctness"]["passed"] and "non-finite" in im["fa3"]["correctness"]["reason"]
    assert im["flashinfer_cuda"]["status"].startswith("unsupported: FlashInfer's CUDA-core decode takes group")
    assert "group_size: 5" in im["flashinfer_cuda"]["error"]
    assert im["flashinfer_xqa"]["status"] == "error: RuntimeError: boom"
    assert r["best_peer"] == "flashinfer_tc" and r["ratio_kindex_vs_best"] == 1.0
    assert r["seed"] == ds.case_seed(1, case["label"]) and set(r["input_checksum"]) == {"q", "k_cache", "v_cache"}
    # the same seed draws the same inputs; another seed, others
    again = ds.run_case(FakeCtx(torch, ["kindex"]), case, ds.parse_args(
        ["--dataset", str(root), "--out", "x.json", "--lib", "l.so", "--impls", "kindex"]), FakeTimer(), 2e12)
    assert again["input_checksum"] == r["input_checksum"]
    other = ds.run_case(FakeCtx(torch, ["kindex"]), case, ds.parse_args(
        ["--dataset", str(root), "--out", "x.json", "--lib", "l.so", "--impls", "kindex", "--seed", "2"]),
        FakeTimer(), 2e12)
    assert other["input_checksum"] != r["input_checksum"]


def test_run_case_skips_what_does_not_fit(cpu_run, monkeypatch):
    torch, root = cpu_run
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (1 << 20, 80 << 30))
    case = ds.load_dataset(root)["cases"][0]
    args = ds.parse_args(["--dataset", str(root), "--out", "x.json", "--impls", "fa3"])
    r = ds.run_case(FakeCtx(torch, args.impls), case, args, FakeTimer(), 2e12)
    assert r["status"].startswith("skipped: needs") and r["impls"] == {}


def test_main_runs_resumes_and_exits_by_the_worst_outcome(cpu_run, tmp_path, capsys):
    torch, root = cpu_run
    out = tmp_path / "r.json"
    base = ["--dataset", str(root), "--out", str(out), "--lib", "l.so"]
    assert ds.main(base + ["--impls", "kindex,flashinfer_tc", "--max-cases", "1"]) == 0
    doc = json.loads(out.read_text())
    assert len(doc["cases"]) == 1 and doc["implementations"]["kindex"]["status"] == "ok"
    assert doc["schema"] == ds.SCHEMA and doc["copy_rate"]["bytes_per_s"] == 2e12
    assert ds.main(base + ["--impls", "kindex,flashinfer_tc", "--resume"]) == 0
    doc = json.loads(out.read_text())
    assert [c["label"] for c in doc["cases"]] == [f"gqa_paged_decode_h20_kv4_d128_ps64#{i}" for i in (0, 1)] + \
        [f"{PS1}#0"]
    assert doc["resumed"][0]["cases"] == 1
    assert doc["summary"]["overall"]["kindex_vs_best"]["of"] == 3
    assert ds.main(base + ["--impls", "kindex,fa3", "--filter", "ps1#"]) == 3  # fa3's stand-in fails the check
    assert ds.main(base + ["--impls", "kindex,flashinfer_xqa", "--filter", "ps1#"]) == 0  # ps1: unsupported
    assert ds.main(base + ["--impls", "kindex,flashinfer_xqa", "--filter", "ps64#1"]) == 1  # ps64: an error
    tl = tmp_path / "tileops.json"
    assert ds.main(["--dataset", str(root), "--out", str(tl), "--impls", "tileops"]) == 0
    assert json.loads(tl.read_text())["cases"][0]["impls"]["tileops"] == {"status": "not installed"}
    capsys.readouterr()
    assert ds.main(["--report", str(out), str(tl)]) == 0
    text = capsys.readouterr().out
    assert "tileops could not run: not installed: stand-in" in text and "| h20_kv4_d128_ps64#0 |" in text


def test_resume_rows_keeps_what_keep_accepts_and_notes_the_earlier_run(tmp_path, capsys):
    doc = {"seed": 2, "cases": []}
    assert db.resume_rows(doc, tmp_path / "absent.json", "cases") == []
    assert doc == {"seed": 2, "cases": []}
    out = tmp_path / "earlier.json"
    out.write_text(json.dumps({"seed": 1, "date_utc": "D", "command": "C", "resumed": [{"cases": 9}],
                               "cases": [{"k": 1, "ok": True}, {"k": 2, "ok": False}]}))
    kept = db.resume_rows(doc, out, "cases", keep=lambda r: r["ok"])
    assert kept == [{"k": 1, "ok": True}] and doc["cases"] == kept
    assert doc["resumed"] == [{"cases": 9}, {"date_utc": "D", "command": "C", "cases": 1}]
    assert "was run with seed 1, this run 2" in capsys.readouterr().out


def test_fit_decode_cost_recovers_the_constants_of_a_model_made_sweep(tmp_path, capsys):
    import fit_decode_cost as fdc
    chip, truth = 3.0e6, (1.2e5, 0.5, 2.0, 0.3, 5.0)  # bytes/us; cta, piece, merge, merge per segment, fixed
    rows = []
    for batch, heads, tokens in ((1, 1, 32768), (1, 8, 2048), (4, 8, 8192), (64, 8, 8192), (256, 8, 16384)):
        case = ("c", batch, heads, tokens * heads * 128 * 4, {})
        variants = {f"s{s}": {"num_segments": s, "median_us": fdc.model_us(case, chip, *truth, s)}
                    for s in (1, 2, 4, 8, 16, 33, 66, 132)}
        rows.append({"definition": f"synthetic_h32_kv{heads}_d128", "label": f"b{batch}_kv{heads}_n{tokens}",
                     "batch_size": batch, "kv_tokens": tokens, "variants": variants})
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({"workloads": rows}))
    assert fdc.main([str(path), "--chip-tb-per-s", "3.0", "--json", str(tmp_path / "fit.json")]) == 0
    fit = json.loads((tmp_path / "fit.json").read_text())
    assert fit["geomean_pick_over_fastest"] == pytest.approx(1.0, abs=1e-3)
    assert fit["fit"]["squared_relative_error"] < 1e-6
    assert fit["fit"]["merge_us"] == pytest.approx(truth[2], rel=0.05)
    assert fit["fit"]["merge_us_per_segment"] == pytest.approx(truth[3], rel=0.05)
    assert fit["fit"]["cta_bytes_per_us"] == pytest.approx(truth[0], rel=0.2)
    assert "kCtaBytesPerUs" in capsys.readouterr().out
    (tmp_path / "empty.json").write_text(json.dumps({"workloads": []}))
    assert fdc.main([str(tmp_path / "empty.json")]) == 1


# ------------------------------------------------------------------------------------------------------------------
# Decode variants and --fp8-vs-bf16 (the stand-in computes every variant with python/tests/decode_reference.py)
# ------------------------------------------------------------------------------------------------------------------
def test_variant_arguments():
    base = ["--dataset", "x", "--out", "o.json", "--lib", "l.so"]
    a = ds.parse_args(base)
    assert a.variant == ds.DEFAULT_VARIANT and ds.is_default(a.variant) and not a.fp8_vs_bf16
    a = ds.parse_args(base + ["--impls", "kindex,flashinfer_tc", "--kv-dtype", "fp8_e5m2", "--layout", "HND",
                              "--q-len", "4", "--window", "127", "--soft-cap", "50", "--sinks", "--rope",
                              "--rope-theta", "5e5", "--k-scale", "0.5", "--v-scale", "2"])
    assert a.variant == dict(kv_dtype="fp8_e5m2", layout="HND", q_len=4, window=127, soft_cap=50.0, sinks=True,
                             rope=True, rope_scale=1.0, rope_theta=5e5, k_scale=0.5, v_scale=2.0)
    assert ds.decode_options(a.variant, sinks="S") == dict(
        kv_layout="HND", q_len_per_req=4, window_left=127, logits_soft_cap=50.0, sinks="S",
        pos_encoding_mode="ROPE_LLAMA", rope_scale=1.0, rope_theta=5e5, k_scale=0.5, v_scale=2.0)
    # Without --rope the variant has no RoPE keys (a row's identity is unchanged) and nothing goes to the libraries.
    a = ds.parse_args(base + ["--impls", "kindex", "--window", "8"])
    assert "rope_scale" not in a.variant and "rope_scale" not in ds.decode_options(a.variant)
    for bad in (["--window", "8"], ["--fp8-vs-bf16"]):  # the default impls include FA3 / XQA: no variant there
        with pytest.raises(SystemExit):
            ds.parse_args(base + bad)
    for bad in (["--q-len", "9"], ["--window", "-2"], ["--soft-cap", "-1"], ["--k-scale", "0"],
                ["--fp8-vs-bf16", "--kv-dtype", "fp8_e4m3"], ["--rope", "--rope-scale", "0"],
                ["--rope", "--rope-theta", "nan"], ["--rope-theta", "5e5"]):
        with pytest.raises(SystemExit):
            ds.parse_args(base + ["--impls", "kindex"] + bad)
    assert ds.known_limits("flashinfer_cuda", {"hq": 8, "hkv": 8, "d": 128, "ps": 16, "q_len": 2}, "9.0").startswith(
        "FlashInfer's CUDA-core decode takes one query token")


def test_paged_decode_params_carry_the_variant():
    torch = pytest.importorskip("torch")
    q = torch.zeros(6, 8, 64, dtype=torch.bfloat16)  # batch 3 x q_len 2
    k = torch.zeros(10, 2, 16, 64, dtype=torch.float8_e4m3fn)  # HND
    indptr, indices = torch.tensor([0, 1, 2, 4], dtype=torch.int32), torch.tensor([1, 2, 3, 4], dtype=torch.int32)
    sinks = torch.zeros(8)
    p = db.paged_decode_params(q, k, k, indptr, indices, None, 0.5, torch.empty_like(q), None,
                               **ds.decode_options(dict(ds.DEFAULT_VARIANT, layout="HND", q_len=2, window=7,
                                                        soft_cap=30.0, rope=True, rope_scale=4.0, rope_theta=5e5,
                                                        k_scale=0.25), sinks))
    assert (p.batch_size, p.num_qo_heads, p.num_kv_heads, p.page_size, p.num_pages) == (3, 8, 2, 16, 10)
    assert (p.kv_format, p.kv_layout, p.q_len_per_req, p.window_left, p.logits_soft_cap, p.pos_encoding,
            p.rope_scale, p.rope_theta, p.k_scale, p.v_scale, p.sinks) == (
        db.KV_FORMAT_FP8_E4M3, db.KV_LAYOUT_HND, 2, 7, 30.0, db.POS_ENCODING_ROPE_LLAMA, 4.0, 5e5, 0.25, 1.0,
        sinks.data_ptr())
    with pytest.raises(TypeError, match="unknown field 'window'"):
        db.paged_decode_params(q, k, k, indptr, indices, None, 0.5, torch.empty_like(q), None, window=3)


class VariantImpl(ds.Impl):
    """A correct stand-in for any variant: the definition itself, on what CaseTensors drew."""

    def call(self):
        out, lse = ds.variant_reference(self.t, self.case, self.t.variant)
        return out, lse.float()


class DtypeTimer(FakeTimer):
    """Medians by the KV dtype of the implementation timed: bf16 20 us, fp8 `fp8_us`."""

    def __init__(self, fp8_us):
        self.fp8_us = fp8_us

    def time(self, fn, warmup, iters):
        fn()
        us = 20.0 if fn.__self__.t.k_cache.dtype == pytest.importorskip("torch").bfloat16 else self.fp8_us
        return dict(db.summarize([us]), warmup=warmup, launch_covered=1.0)


def test_run_case_draws_and_checks_the_variant(cpu_run, monkeypatch):
    torch, root = cpu_run
    monkeypatch.setattr(ds, "make_impl", lambda name, ctx, case, t, args: VariantImpl(ctx, case, t))
    case = next(c for c in ds.load_dataset(root)["cases"] if c["label"].endswith("ps64#0"))
    base = ["--dataset", str(root), "--out", "x.json", "--lib", "l.so", "--impls", "kindex"]
    plain = ds.run_case(FakeCtx(torch, ["kindex"]), case, ds.parse_args(base), FakeTimer(), 2e12)
    args = ds.parse_args(base + ["--kv-dtype", "fp8_e4m3", "--layout", "HND", "--q-len", "2", "--window", "5",
                                 "--soft-cap", "20", "--sinks"])
    r = ds.run_case(FakeCtx(torch, ["kindex"]), case, args, FakeTimer(), 2e12)
    assert r["status"] == "done" and r["impls"]["kindex"]["correctness"]["passed"], r
    assert r["variant"] == args.variant and "variant" not in plain
    # fp8 halves the KV bytes of the floor; q, output and lse have q_len rows per request
    b, hq, hkv, d = case["batch_size"], case["hq"], case["hkv"], case["d"]
    assert plain["bytes"] - r["bytes"] == r["kv_rows_unique"] * hkv * d * 2 - (2 * b * hq * d * 2 + b * hq * 4)
    assert r["kv_bytes_bf16"] == plain["kv_bytes_bf16"] == r["kv_rows_unique"] * hkv * d * 4
    # The same draw: HND is NHD transposed, fp8 its conversion.
    seen = {}
    monkeypatch.setattr(ds, "make_impl", lambda name, ctx, case, t, args: seen.setdefault(
        t.variant["layout"], t) and VariantImpl(ctx, case, t))
    ds.run_case(FakeCtx(torch, ["kindex"]), case, ds.parse_args(base + ["--layout", "HND", "--kv-dtype", "fp8_e4m3"]),
                FakeTimer(), 2e12)
    ds.run_case(FakeCtx(torch, ["kindex"]), case, ds.parse_args(base + ["--q-len", "1"]), FakeTimer(), 2e12)
    nhd, hnd = seen["NHD"].k_cache, seen["HND"].k_cache
    assert hnd.dtype == torch.float8_e4m3fn and torch.equal(hnd.float(), nhd.transpose(1, 2).to(hnd.dtype).float())


@pytest.mark.parametrize("fp8_us,met", [(10.0, True), (15.0, False)])
def test_fp8_vs_bf16_runs_each_case_twice_and_judges_the_goal(cpu_run, monkeypatch, tmp_path, capsys, fp8_us, met):
    torch, root = cpu_run
    monkeypatch.setattr(ds, "make_impl", lambda name, ctx, case, t, args: VariantImpl(ctx, case, t))
    monkeypatch.setattr(db, "DeviceTimer", lambda spin_us: DtypeTimer(fp8_us))
    monkeypatch.setattr(ds, "FP8_GOAL", dict(ds.FP8_GOAL, min_kv_bytes=100 << 10))  # the stand-in cases are small
    out = tmp_path / "fp8.json"
    base = ["--dataset", str(root), "--out", str(out), "--lib", "l.so", "--impls", "kindex", "--fp8-vs-bf16"]
    assert ds.main(base) == 0
    doc = json.loads(out.read_text())
    kinds = [r.get("variant", ds.DEFAULT_VARIANT)["kv_dtype"] for r in doc["cases"]]
    assert kinds == ["bf16", "fp8_e4m3"] * 3
    cases = doc["fp8_vs_bf16"]["cases"]
    assert len(cases) == 3 and all(c["kindex"]["speedup"] == pytest.approx(20.0 / fp8_us) for c in cases)
    goal = doc["fp8_vs_bf16"]["goal_kindex"]
    big = [c for c in cases if c["kv_bytes_bf16"] >= 100 << 10]
    assert 0 < len(big) < 3 and goal["cases"] == goal["timed"] == len(big) and goal["met"] is met
    assert len(goal["missed"]) == (0 if met else len(big))
    # --resume keeps both rows of each case: nothing left to run
    capsys.readouterr()
    assert ds.main(base + ["--resume"]) == 0
    assert len(json.loads(out.read_text())["cases"]) == 6 and "0 case(s) to run" in capsys.readouterr().out
    assert ds.main(["--report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "### fp8 e4m3 KV against bf16 KV" in text and ("Goal (kindex fp8 >= 1.7x bf16 on cases >= 0 MB): " +
                                                          ("met" if met else "NOT met")) in text


def test_the_flashinfer_runner_plans_and_runs_with_the_variant(cpu_run):
    torch, root = cpu_run
    case = next(c for c in ds.load_dataset(root)["cases"] if c["label"].endswith("ps64#0"))
    args = ds.parse_args(["--dataset", str(root), "--out", "x.json", "--lib", "l.so", "--impls", "flashinfer_tc",
                          "--kv-dtype", "fp8_e5m2", "--q-len", "2", "--window", "5", "--soft-cap", "20",
                          "--rope", "--rope-scale", "8", "--rope-theta", "5e5", "--k-scale", "0.5"])
    t = ds.CaseTensors(torch, dict(case, q_len=2), ds.load_tables(case), 1, args.variant)
    calls = []

    class Recorder:
        def plan(self, *positional, **options):
            calls.append(("plan", options))

        def run(self, q, kv, **options):
            calls.append(("run", q.shape, kv[0].dtype, options))

    ctx = FakeCtx(torch, args.impls)
    ctx.fi_wrappers = {"flashinfer_tc": Recorder()}
    ds.FlashInferFa2Impl(ctx, case, t, "flashinfer_tc", 0).call()
    (_, plan), (_, q_shape, kv_dtype, run) = calls
    assert plan == dict(q_data_type=torch.bfloat16, kv_data_type=torch.float8_e5m2, sm_scale=case["sm_scale"],
                        q_len_per_req=2, window_left=5, logits_soft_cap=20.0, pos_encoding_mode="ROPE_LLAMA",
                        rope_scale=8.0, rope_theta=5e5)
    assert q_shape == (2 * case["batch_size"], case["hq"], case["d"]) and kv_dtype == torch.float8_e5m2
    assert "sinks" not in run and (run["k_scale"], run["v_scale"]) == (0.5, 1.0)
    assert run["return_lse"] and run["lse"].shape == (2 * case["batch_size"], case["hq"])


class SinkRecorder:
    """FlashInfer's sink wrapper (a BatchPrefillWithPagedKVCacheWrapper with the AttentionSink variant), recording."""

    def __init__(self, calls):
        self.calls = calls

    def plan(self, *positional, **options):
        self.calls.append(("plan", positional, options))

    def run(self, q, kv, *args, **options):
        self.calls.append(("run", q.shape, args, options))


def test_flashinfer_sinks_go_through_the_attention_sink_variant_not_run_sinks(cpu_run):
    # FlashInfer 0.7.2's decode wrapper drops run(sinks=...) on fa2 (ds.FLASHINFER_SINKS): the tensor-core column
    # runs the AttentionSink variant with the sinks as its additional tensor and sm_scale (x k_scale) as its scalar.
    torch, root = cpu_run
    case = next(c for c in ds.load_dataset(root)["cases"] if c["label"].endswith("ps64#0"))
    base = ["--dataset", str(root), "--out", "x.json", "--lib", "l.so", "--impls", "flashinfer_tc,flashinfer_cuda"]
    args = ds.parse_args(base + ["--q-len", "2", "--window", "5", "--sinks", "--k-scale", "0.5", "--v-scale", "2"])
    t = ds.CaseTensors(torch, dict(case, q_len=2), ds.load_tables(case), 1, args.variant)
    calls, built = [], []
    ctx = FakeCtx(torch, args.impls)
    ctx.fi_wrappers = {}  # the decode wrappers must not be used with sinks
    ctx.sink_wrapper = lambda d, kv_dtype, window: built.append((d, kv_dtype, window)) or (SinkRecorder(calls), 0.5)
    impl = ds.FlashInferFa2Impl(ctx, case, t, "flashinfer_tc", 1)
    out, lse = impl.call()
    assert built == [(case["d"], torch.bfloat16, 5)] and impl.info["sink_module_build_s"] == 0.5
    assert "AttentionSink" in impl.info["sinks_via"]
    (_, plan_pos, plan), _, (_, q_shape, run_args, run) = calls  # the first plan, plan_repeats 1, then run
    b = case["batch_size"]
    assert plan_pos[0].tolist() == list(range(0, 2 * b + 1, 2)) and plan_pos[0].dtype == torch.int32
    assert plan_pos[1] is t.indptr_h and plan_pos[2] is t.indices and plan_pos[3] is t.last_h
    assert plan_pos[4:] == (case["hq"], case["hkv"], case["d"], case["ps"])
    assert plan == dict(causal=True, window_left=5, sm_scale=case["sm_scale"], q_data_type=torch.bfloat16,
                        kv_data_type=torch.bfloat16)
    assert run_args[0] is t.sinks and run_args[1] == pytest.approx(case["sm_scale"] * 0.5) and len(run_args) == 2
    assert "sinks" not in run and run["v_scale"] == 2.0 and "k_scale" not in run and run["return_lse"]
    assert q_shape == (2 * b, case["hq"], case["d"]) and lse.shape == (2 * b, case["hq"])
    # q_len 1: not causal; no window: -1
    args1 = ds.parse_args(base + ["--sinks"])
    t1 = ds.CaseTensors(torch, case, ds.load_tables(case), 1, args1.variant)
    calls.clear()
    ds.FlashInferFa2Impl(ctx, case, t1, "flashinfer_tc", 0).call()
    (_, plan_pos, plan), (_, _, run_args, run) = calls
    assert plan_pos[0].tolist() == list(range(b + 1)) and not plan["causal"] and plan["window_left"] == -1
    assert run_args[1] == case["sm_scale"] and run == dict(out=run["out"], lse=run["lse"], return_lse=True)
    # What FlashInfer cannot express is refused before any call (the call itself would not fail).
    for name, extra, reason in (("flashinfer_cuda", [], "flashinfer_cuda"), ("flashinfer_tc", ["--soft-cap", "30"],
                                                                          "soft_cap"),
                                ("flashinfer_tc", ["--rope"], "rope")):
        a = ds.parse_args(base + ["--sinks"] + extra)
        tt = ds.CaseTensors(torch, case, ds.load_tables(case), 1, a.variant)
        with pytest.raises(NotImplementedError, match="FlashInfer 0.7.2") as e:
            ds.FlashInferFa2Impl(ctx, case, tt, name, 0)
        assert str(e.value) == ds.FLASHINFER_SINK_LIMITS[reason]


def test_run_case_records_flashinfer_cuda_as_unsupported_with_sinks(cpu_run, monkeypatch):
    torch, root = cpu_run
    case = next(c for c in ds.load_dataset(root)["cases"] if c["label"].endswith("ps64#0"))
    monkeypatch.setattr(ds, "make_impl", lambda name, ctx, case, t, args: (
        VariantImpl(ctx, case, t) if name == "kindex" else ds.FlashInferFa2Impl(ctx, case, t, name, 0)))
    args = ds.parse_args(["--dataset", str(root), "--out", "x.json", "--lib", "l.so", "--impls",
                          "kindex,flashinfer_cuda", "--sinks", "--window", "127"])
    r = ds.run_case(FakeCtx(torch, args.impls), case, args, FakeTimer(), 2e12)
    assert r["status"] == "done" and r["impls"]["kindex"]["correctness"]["passed"]
    e = r["impls"]["flashinfer_cuda"]
    assert e["status"] == "unsupported: " + ds.FLASHINFER_SINK_LIMITS["flashinfer_cuda"] and e["stage"] == "set-up"


def test_flashinfer_attention_sink_math_is_the_definitions_and_the_old_call_was_not():
    """The AttentionSink variant's arithmetic as FLASHINFER_SINKS reads it (log2 domain of sm_scale * q.k, sink[h]
    * log2(e) joined to chunk 0's max and denominator, chunks merged by their lse) against decode_reference; and
    attention without the sink (what run(sinks=...) on fa2 computed) against the same: it fails the comparator."""
    torch = pytest.importorskip("torch")
    import decode_reference as dr
    gen = torch.Generator().manual_seed(5)
    n, hq, hkv, d, window, chunk = 300, 8, 2, 64, 127, 48
    q = torch.randn(1, hq, d, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(n, hkv, d, generator=gen, dtype=torch.float64) for _ in range(2))
    sinks = 2.0 * torch.randn(hq, generator=gen, dtype=torch.float64)
    sm_scale = d ** -0.5
    want_out, want_lse = dr.attend(q, k, v, sm_scale, window_left=window, sinks=sinks)
    log2e = 1.0 / math.log(2.0)
    kk, vv = k.repeat_interleave(hq // hkv, dim=1), v.repeat_interleave(hq // hkv, dim=1)
    s = torch.einsum("hd,nhd->hn", q[0], kk) * sm_scale * log2e  # the kernel's log2 domain
    seen = torch.arange(n) >= n - 1 - window
    states = []
    for c0 in range(0, n, chunk):  # split-KV: chunk index c0 // chunk is the kernel's kv_tile_idx
        sc = s[:, c0:c0 + chunk].masked_fill(~seen[c0:c0 + chunk], -math.inf)
        m = sc.max(dim=-1).values
        p = torch.exp2(sc - m[:, None]).nan_to_num(0.0)
        dd, o = p.sum(-1), torch.einsum("hn,nhd->hd", p, vv[c0:c0 + chunk])
        if c0 == 0:  # REGISTER_M_D_UPDATE: kv_tile_idx == 0 only
            log_sink = sinks * log2e
            m_new = torch.maximum(m, log_sink)
            scale = torch.exp2(m - m_new)
            dd, m = torch.exp2(log_sink - m_new) + dd * scale, m_new
            o = o * scale[:, None]
        # OUTPUT_TRANSFORM (d_rcp 0 on a row with nothing seen), lse = m + log2(d)
        states.append(((o / dd[:, None]).nan_to_num(0.0), m + torch.log2(dd)))
    lse = torch.logsumexp(torch.stack([st[1] for st in states]) / log2e, dim=0) * log2e
    out = sum(st[0] * torch.exp2(st[1] - lse)[:, None] for st in states)
    assert torch.allclose(out, want_out[0], atol=1e-12) and torch.allclose(lse, want_lse[0], atol=1e-12)
    # Without the sink: what the suite's old run(..., sinks=S) got from FlashInfer's fa2 decode.
    no_sink, _ = dr.attend(q, k, v, sm_scale, window_left=window)
    report = db.compare_fib(no_sink.to(torch.bfloat16), want_out.to(torch.bfloat16), "output", **ds.FIB_TOLERANCE)
    assert not report["passed"]
