#!/usr/bin/env python3
"""Runs a FlashInfer-Bench definition's `reference` on given inputs, as FlashInfer-Bench calls it (`run` with the
inputs in the definition's order), with PyTorch where it is installed, else with numpy_torch (numpy): how the tests
check a definition's Python reference against kindex's CPU reference (tests/runner/test_decode_variants.cpp).

    run_reference.py DEFINITION.json INPUTS.safetensors OUTPUTS.safetensors [--numpy]

INPUTS holds every tensor input under its name and, in the metadata key "scalars", a JSON object of the scalar
inputs; OUTPUTS gets the definition's outputs (float tensors as float32 or bfloat16 by their declared dtype).
--numpy uses numpy_torch even where torch is installed. Prints which one ran.
"""
import json
import pathlib
import struct
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent


def fp8_table(exp_bits, man_bits, bias, fn):
    """Every fp8 code's value (float32): fn is e4m3fn (no infinity; S.1111.111 NaN)."""
    values = []
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        exp, man = (code >> man_bits) & ((1 << exp_bits) - 1), code & ((1 << man_bits) - 1)
        top = (1 << exp_bits) - 1
        if fn and exp == top and man == (1 << man_bits) - 1:
            values.append(float("nan"))
        elif not fn and exp == top:
            values.append(sign * float("inf") if man == 0 else float("nan"))
        elif exp == 0:
            values.append(sign * man * 2.0 ** (1 - bias - man_bits))
        else:
            values.append(sign * (1 + man / (1 << man_bits)) * 2.0 ** (exp - bias))
    return np.array(values, dtype=np.float32)


DECODE = {
    "BF16": lambda raw: (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32),
    "F16": lambda raw: np.frombuffer(raw, "<f2").astype(np.float32),
    "F32": lambda raw: np.frombuffer(raw, "<f4").copy(),
    "I32": lambda raw: np.frombuffer(raw, "<i4").copy(),
    "I64": lambda raw: np.frombuffer(raw, "<i8").copy(),
    "F8_E4M3": lambda raw: fp8_table(4, 3, 7, True)[np.frombuffer(raw, np.uint8)],
    "F8_E5M2": lambda raw: fp8_table(5, 2, 15, False)[np.frombuffer(raw, np.uint8)],
}
TORCH_NAMES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "I32": "int32", "I64": "int64",
               "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}


def read_safetensors(path):
    raw = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack_from("<Q", raw, 0)
    header = json.loads(raw[8:8 + n])
    metadata = header.pop("__metadata__", {})
    data = raw[8 + n:]
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        tensors[name] = (entry["dtype"], entry["shape"], data[begin:end])
    return tensors, metadata


def write_safetensors(path, tensors):
    header, data = {}, b""
    for name, (dtype, shape, blob) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    pathlib.Path(path).write_bytes(struct.pack("<Q", len(text)) + text + data)


def load_torch(force_numpy):
    if not force_numpy:
        try:
            import torch
            return torch, "torch " + torch.__version__
        except ImportError:
            pass
    sys.path.insert(0, str(HERE))
    import numpy_torch
    sys.modules["torch"] = numpy_torch
    return numpy_torch, "numpy_torch (numpy " + np.__version__ + ")"


def to_tensor(torch, dtype, shape, raw):
    values = DECODE[dtype](raw).reshape(shape)
    target = getattr(torch, TORCH_NAMES[dtype])
    if torch.__name__ == "numpy_torch":
        return torch.tensor_of(values, target)
    if dtype in ("BF16", "F8_E4M3", "F8_E5M2"):  # exact: every value is on the target's grid
        return torch.from_numpy(values.astype(np.float32)).to(target)
    return torch.from_numpy(values)


def to_bytes(torch, tensor, dtype):
    if torch.__name__ == "numpy_torch":
        values = tensor.a
    else:
        values = tensor.detach().to(torch.float32).cpu().numpy() if dtype in ("bfloat16", "float32") else \
            tensor.cpu().numpy()
    values = np.ascontiguousarray(values, dtype=np.float32)
    if dtype == "bfloat16":
        return "BF16", (values.view(np.uint32) >> 16).astype("<u2").tobytes()
    if dtype == "float32":
        return "F32", values.astype("<f4").tobytes()
    raise ValueError(f"output dtype {dtype}")


def main():
    definition_file, inputs_file, outputs_file = sys.argv[1:4]
    torch, which = load_torch("--numpy" in sys.argv)
    definition = json.loads(pathlib.Path(definition_file).read_text())
    tensors, metadata = read_safetensors(inputs_file)
    scalars = json.loads(metadata.get("scalars", "{}"))
    args = []
    for name, spec in definition["inputs"].items():
        if spec["shape"] is None:
            value = scalars[name]
            args.append(int(value) if spec["dtype"].startswith("int") else float(value))
        else:
            args.append(to_tensor(torch, *tensors[name]))
    namespace = {"__name__": "definition_reference"}
    exec(compile(definition["reference"], definition["name"] + ".reference", "exec"), namespace)
    results = namespace["run"](*args)
    results = results if isinstance(results, tuple) else (results,)
    out = {}
    for (name, spec), value in zip(definition["outputs"].items(), results):
        dtype, blob = to_bytes(torch, value, spec["dtype"])
        out[name] = (dtype, tuple(value.shape), blob)
    write_safetensors(outputs_file, out)
    print(which)


if __name__ == "__main__":
    main()
