#!/usr/bin/env python3
"""Reads a `kindex catalog export` of the suite with the standard library alone, as a harness would: every workload
line's page-table inputs, from the safetensors files they name, checked against the line's axes and against the
shape of the length distribution the file's metadata names.

    python3 definitions/model_suite/read_export.py EXPORT_DIR     (exit status 1 if anything is wrong)
"""
import json
import pathlib
import struct
import sys

DTYPES = {"I32": ("i", 4)}


def read_safetensors(path):
    """{name: (dtype, shape, list of values)}, metadata; the format: u64 little-endian header length, JSON header,
    then the data buffer that each entry's data_offsets index."""
    raw = path.read_bytes()
    (n,) = struct.unpack_from("<Q", raw, 0)
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, entry in header.items():
        code, size = DTYPES[entry["dtype"]]
        begin, end = entry["data_offsets"]
        count = (end - begin) // size
        tensors[name] = (entry["dtype"], entry["shape"], list(struct.unpack_from(f"<{count}{code}", data, begin)))
    return tensors, metadata


def check_shape(lengths, distribution, indices):
    """The distribution's promise about the pages per sequence (docs/catalog.md, "Page tables")."""
    batch = len(lengths)
    if min(lengths) < 1:
        return "a sequence without pages"
    if distribution == "equal" and max(lengths) - min(lengths) > 1:
        return f"equal lengths differ by {max(lengths) - min(lengths)}"
    if distribution == "one_long" and batch > 1 and max(lengths) < indices // 2:
        return f"the long sequence holds {max(lengths)} of {indices} pages"
    if distribution == "long_tail" and batch >= 32 and indices >= 8 * batch:
        top = sum(sorted(lengths, reverse=True)[:batch // 10])
        if 2 * top <= indices:
            return f"the top tenth holds {top} of {indices} pages"
    return None


def main():
    root = pathlib.Path(sys.argv[1])
    problems, counts = [], {}
    for jsonl in sorted((root / "workloads").rglob("*.jsonl")):
        for line in jsonl.read_text().splitlines():
            w = json.loads(line)["workload"]
            axes, inputs = w["axes"], w["inputs"]
            where = f"{jsonl.name} {w['uuid']}"
            paths = {inputs[k]["path"] for k in ("kv_indptr", "kv_indices") if inputs[k]["type"] == "safetensors"}
            if len(paths) != 1:
                problems.append(f"{where}: page-table inputs name {sorted(paths)}")
                continue
            tensors, metadata = read_safetensors(root / paths.pop())
            indptr = tensors["kv_indptr"][2]
            ids = tensors["kv_indices"][2]
            batch, pages, indices = axes["batch_size"], axes["num_pages"], axes["num_kv_indices"]
            if metadata.get("uuid") != w["uuid"]:
                problems.append(f"{where}: the file is workload {metadata.get('uuid')}'s")
            if tensors["kv_indptr"][1] != [batch + 1] or tensors["kv_indices"][1] != [indices]:
                problems.append(f"{where}: shapes {tensors['kv_indptr'][1]} {tensors['kv_indices'][1]}")
                continue
            if indptr[0] != 0 or indptr[-1] != indices or any(a > b for a, b in zip(indptr, indptr[1:])):
                problems.append(f"{where}: kv_indptr is not 0 .. num_kv_indices, non-decreasing")
            if not all(0 <= i < pages for i in ids):
                problems.append(f"{where}: a page id outside [0, {pages})")
            if "kv_last_page_len" in tensors and tensors["kv_last_page_len"][1] != [batch]:
                problems.append(f"{where}: kv_last_page_len shape {tensors['kv_last_page_len'][1]}")
            distribution = metadata.get("lengths", "")
            why = check_shape([b - a for a, b in zip(indptr, indptr[1:])], distribution, indices)
            if why:
                problems.append(f"{where}: {distribution}: {why}")
            counts[distribution] = counts.get(distribution, 0) + 1
    for p in problems:
        print("error", p)
    print(f"{sum(counts.values())} workloads read ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}), "
          f"{len(problems)} errors")
    return 1 if problems or not counts else 0


if __name__ == "__main__":
    sys.exit(main())
