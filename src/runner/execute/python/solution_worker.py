"""kindex's solution worker: runs a FlashInfer-Bench or SOL-ExecBench solution (Python source: python, triton,
pytorch) for `kindex bench --impl solution:FILE` and the built-in peers (flashinfer, torch-compile).

The runner (src/runner/execute/solution.cpp) starts it as `python3 -u -B SCRATCH_DIR/solution_worker.py` from its worker
process (written out of the binary into a scratch folder the runner removes), after reading the solution file
itself (one loader per harness format, in C++): this process gets the sources, the entry point and the calling
convention, never the harness's JSON. It imports only the standard library and, where installed, torch: it is
embedded in the kindex binary and runs without the kindex package.

Protocol: one JSON request per line on stdin, one JSON reply per line on the original stdout. The solution's own
prints go to stderr (fd 1 is pointed there), so they cannot break a reply. Every reply has "ok"; a failure has
"status" (KernelIndex's run status), "message" and "sticky" (the CUDA context is broken: the runner replaces this
process).

  {"op": "probe", "modules": [NAME, ...]}            -> {"ok": true, "versions": {...}, "missing": {NAME: why},
                                                          "compile_cache_empty": BOOL (where torch was probed)}
      compile_cache_empty: torch.compile's on-disk caches hold nothing yet (_compile_cache_empty), so every shape
      of a set-up will compile: the runner starts its warm-up helpers at once instead of after the first workload.
  {"op": "load", "key": K, "dir": DIR, "solution": {"name", "entry_file", "entry_function", "sources": [{path,
   content}], "destination_passing_style"}, "device": BOOL, "library": PATH|null}
                                                      -> {"ok": true}
  {"op": "round", "key": K, "inputs": [{"name", "dtype", "shape", "file"} | {"name", "dtype", "shape", "random":
   {kind, numel, seed, stream, scale, row, pages_file, num_pages, page_elems}} | {"name", "scalar": VALUE}],
   "outputs": [{"name", "dtype", "shape", "file" | "ipc"}]}
                                                      -> {"ok": true, "plan_s": SECONDS|null}
      Builds the inputs (files: raw little-endian bytes; random: drawn on the device by libkindex_gpu_reference.so's
      kindex_gpu_reference_fill_random, the runner's own generator, so the bits are those of a native run), calls the
      solution once and hands each output back: its bytes to its file, or, where the runner compares on the device,
      copied into the runner's buffer whose CUDA IPC handle "ipc" is (hex; "" for an empty tensor), mapped for this
      round only. If the entry module defines `plan` (kindex's peers do), it is called first with the same
      arguments, untimed, its host time returned as plan_s.
  {"op": "prepare", "key": K, "calls": [{"inputs": [... as a round's, random tensors as {"name", "dtype", "shape",
   "unfilled": true}], "outputs": [{"name", "dtype", "shape"}]}]}
                                                      -> {"ok": true, "planned": N, "compile_cache": {"hits", "misses"}}
      The solution's one-time set-up ahead of its runs (the runner sends it while other implementations are measured):
      calls the entry module's `plan` once per call with that call's arguments, the random tensors left unfilled
      (no GPU work for inputs: a plan step sees shapes, dtypes, scalars and the page tables, which are sent), the
      outputs too; the entry point is not called, nothing is timed or written back. Without `plan`, loading the module
      was the set-up. compile_cache: torch.compile's on-disk cache hits and misses during the request (_compile_cache).
  {"op": "time", "protocol": {"untimed", "warmup", "iterations", "cold_l2", "prefer_cupti"}, "fresh_addresses": B}
                                                      -> {"ok": true, "ns": [...], "timer": NAME, "note": TEXT}
      Times the last round's call with kindex_gpu_reference_time_calls: the runner's own timer (src/measure/timer.cpp:
      cold L2, CUPTI spans), calling back into Python for each call. On the host (no device), a steady clock around
      each call, as the runner's host timer does. fresh_addresses: SOL-ExecBench's copy of the inputs to new addresses
      before every call (a slot 256 bytes further into a pool per input, as the native runs do).
"""

import ctypes
import importlib
import importlib.util
import json
import os
import struct
import sys
import time
import traceback
from pathlib import Path

_DTYPES = {  # kindex dtype name -> (bytes per element, struct code, kindex_dtype of the C ABI)
    "bfloat16": (2, None, 0),
    "float16": (2, "e", 1),
    "float32": (4, "f", 2),
    "int32": (4, "i", 3),
    "int64": (8, "q", None),
}

# Messages of CUDA errors after which the context is unusable (the runner's device.cpp classifies the same codes).
_STICKY = ("illegal memory access", "unspecified launch failure", "misaligned address", "illegal instruction",
           "an illegal", "device-side assert", "hardware stack error", "launch timed out")


class WorkerError(Exception):
    def __init__(self, message, status="runtime_error", sticky=False):
        super().__init__(message)
        self.status, self.sticky = status, sticky


# --- tensors without torch (the CPU path: CI has no torch) --------------------------------------------------------

def _bf16_to_float(bits):
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


def _float_to_bf16(x):
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    if (u & 0x7F800000) == 0x7F800000 and (u & 0x7FFFFF):
        return 0x7FC0
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


class HostTensor:
    """A dense host tensor for solutions run where torch is not installed: shape, dtype (the definition's name),
    `values()` (a flat list of Python numbers) and `assign(values)` (writes a flat list back)."""

    def __init__(self, dtype, shape, data=None):
        self.dtype, self.shape = dtype, tuple(shape)
        self.numel = 1
        for d in self.shape:
            self.numel *= d
        size = _DTYPES[dtype][0] * self.numel
        self.data = bytearray(data) if data is not None else bytearray(b"\xff" * size)
        if len(self.data) != size:
            raise WorkerError(f"{dtype} {list(shape)}: {len(self.data)} bytes, expected {size}")

    def values(self):
        size, code, _ = _DTYPES[self.dtype]
        if code is None:  # bfloat16
            return [_bf16_to_float(b) for b in struct.unpack(f"<{self.numel}H", bytes(self.data))]
        return list(struct.unpack(f"<{self.numel}{code}", bytes(self.data)))

    def assign(self, values):
        values = list(values)
        if len(values) != self.numel:
            raise ValueError(f"assign: {len(values)} values for a tensor of {self.numel}")
        size, code, _ = _DTYPES[self.dtype]
        if code is None:
            self.data[:] = struct.pack(f"<{self.numel}H", *(_float_to_bf16(float(v)) for v in values))
        else:
            self.data[:] = struct.pack(f"<{self.numel}{code}", *values)

    def tobytes(self):
        return bytes(self.data)


# --- the runner's libkindex_gpu_reference.so -----------------------------------------------------------------------

class _RandomFill(ctypes.Structure):
    """kindex_random_fill (include/kindex/gpu_reference.h), field for field."""
    _fields_ = [("kind", ctypes.c_int), ("dtype", ctypes.c_int), ("numel", ctypes.c_int64),
                ("seed", ctypes.c_uint64), ("stream", ctypes.c_uint64), ("scale", ctypes.c_double),
                ("row", ctypes.c_int64), ("pages_used", ctypes.c_void_p), ("num_pages", ctypes.c_int64),
                ("page_elems", ctypes.c_int64)]


class _TimingProtocol(ctypes.Structure):
    """kindex_timing_protocol (include/kindex/gpu_reference.h), field for field."""
    _fields_ = [("untimed", ctypes.c_int32), ("warmup", ctypes.c_int32), ("iterations", ctypes.c_int32),
                ("cold_l2", ctypes.c_int32), ("prefer_cupti", ctypes.c_int32)]


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class _Library:
    def __init__(self, path):
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as e:
            raise WorkerError(f"cannot load {path}: {e}")
        self.lib.kindex_gpu_reference_fill_random.argtypes = [ctypes.POINTER(_RandomFill), ctypes.c_void_p,
                                                              ctypes.c_void_p]
        self.lib.kindex_gpu_reference_fill_random.restype = ctypes.c_int
        self.lib.kindex_last_error.restype = ctypes.c_char_p
        self.lib.kindex_gpu_reference_ipc_open.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                                           ctypes.POINTER(ctypes.c_void_p)]
        self.lib.kindex_gpu_reference_ipc_open.restype = ctypes.c_int
        self.lib.kindex_gpu_reference_ipc_close.argtypes = [ctypes.c_void_p]
        self.lib.kindex_gpu_reference_ipc_close.restype = ctypes.c_int
        self.time_calls = getattr(self.lib, "kindex_gpu_reference_time_calls", None)
        if self.time_calls is not None:
            self.time_calls.argtypes = [ctypes.POINTER(_TimingProtocol), _CALLBACK, _CALLBACK, ctypes.c_void_p,
                                        ctypes.c_void_p, ctypes.POINTER(ctypes.c_double), ctypes.c_char_p,
                                        ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
            self.time_calls.restype = ctypes.c_int

    def ipc_open(self, handle_hex):
        handle = bytes.fromhex(handle_hex)
        ptr = ctypes.c_void_p()
        s = self.lib.kindex_gpu_reference_ipc_open(handle, len(handle), ctypes.byref(ptr))
        if s != 0:
            self.error("kindex_gpu_reference_ipc_open", s)
        return ptr.value

    def ipc_close(self, ptr):
        s = self.lib.kindex_gpu_reference_ipc_close(ctypes.c_void_p(ptr))
        if s != 0:
            self.error("kindex_gpu_reference_ipc_close", s)

    def error(self, what, status):
        text = (self.lib.kindex_last_error() or b"").decode(errors="replace")
        raise WorkerError(f"{what} returned status {status}: {text}", sticky=_is_sticky(text))


def _is_sticky(text):
    low = text.lower()
    return any(s in low for s in _STICKY)


# --- the worker ---------------------------------------------------------------------------------------------------

class _DeviceBytes:
    """`nbytes` bytes of device memory at `ptr`, for torch.as_tensor (the CUDA array interface; no copy)."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3,
                                         "strides": None, "stream": None}


class Worker:
    def __init__(self):
        self.torch = None
        self.device = False
        self.library = None
        self.loaded = {}  # key -> (module, entry, destination_passing_style, plan)
        self.last = None  # the last round: (entry, args, outputs, destination_passing_style)

    def _import_torch(self):
        if self.torch is None:
            try:
                import torch  # noqa: PLC0415
            except ImportError:
                return None
            self.torch = torch
        return self.torch

    def probe(self, req):
        versions, missing = {"python": sys.version.split()[0]}, {}
        for name in req.get("modules", []):
            try:
                mod = importlib.import_module(name)
                versions[name] = getattr(mod, "__version__", "?")
            except Exception as e:  # noqa: BLE001 (any failure to import is "not installed" here)
                missing[name] = f"{type(e).__name__}: {e}"
        reply = {"versions": versions, "missing": missing}
        if "torch" in versions:
            reply["compile_cache_empty"] = self._compile_cache_empty()
        return reply

    @staticmethod
    def _compile_cache_empty():
        """Whether Inductor's FX graph cache and AOTAutograd's cache (under TORCHINDUCTOR_CACHE_DIR, by default
        <temp dir>/torchinductor_<user>) are both empty or absent; False where that cannot be told. The folder comes
        from torch's own cache_dir_utils.py, loaded by its path: a file without torch dependencies, where importing
        the torch._inductor package would take seconds of the runner's start."""
        try:
            import torch  # noqa: PLC0415

            path = os.path.join(os.path.dirname(torch.__file__), "_inductor", "runtime", "cache_dir_utils.py")
            spec = importlib.util.spec_from_file_location("_kindex_inductor_cache_dir", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            root = module.cache_dir()
        except Exception:  # noqa: BLE001 (another torch layout: the first workload's set-up tells)
            return False
        return not any(os.path.isdir(d) and os.listdir(d)
                       for d in (os.path.join(root, "fxgraph"), os.path.join(root, "aotautograd")))

    def load(self, req):
        self.device = bool(req.get("device"))
        if self.device:
            if self._import_torch() is None:
                raise WorkerError("torch is not importable in this Python (" + sys.executable + ")")
            if not self.torch.cuda.is_available():
                raise WorkerError("torch sees no CUDA device")
            if req.get("library") and self.library is None:
                self.library = _Library(req["library"])
        else:
            self._import_torch()
        key, sol = req["key"], req["solution"]
        if key in self.loaded:
            return {}
        package = "kindex_solution_" + str(len(self.loaded))
        root = Path(req["dir"]) / package
        for src in sol["sources"]:
            target = root / src["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(src["content"])
        (root / "__init__.py").touch(exist_ok=True)
        if str(req["dir"]) not in sys.path:
            sys.path.insert(0, str(req["dir"]))
        module_name = package + "." + ".".join(Path(sol["entry_file"]).with_suffix("").parts)
        try:
            module = importlib.import_module(module_name)
        except Exception as e:  # noqa: BLE001
            raise WorkerError(f"solution {sol['name']}: importing {sol['entry_file']} failed: "
                              f"{type(e).__name__}: {e}")
        entry = getattr(module, sol["entry_function"], None)
        if not callable(entry):
            raise WorkerError(f"solution {sol['name']}: {sol['entry_file']} has no function "
                              f"{sol['entry_function']!r}")
        plan = getattr(module, "plan", None)
        self.loaded[key] = (entry, bool(sol["destination_passing_style"]), plan if callable(plan) else None,
                            sol["name"])
        return {}

    # tensors
    def _torch_dtype(self, name):
        return {"bfloat16": self.torch.bfloat16, "float16": self.torch.float16, "float32": self.torch.float32,
                "int32": self.torch.int32, "int64": self.torch.int64, "float8_e4m3fn": self.torch.float8_e4m3fn,
                "float8_e5m2": self.torch.float8_e5m2}[name]

    def _from_file(self, spec):
        data = Path(spec["file"]).read_bytes()
        if self.torch is None:
            return HostTensor(spec["dtype"], spec["shape"], data)
        t = self.torch.frombuffer(bytearray(data), dtype=self._torch_dtype(spec["dtype"])) if data else \
            self.torch.empty(0, dtype=self._torch_dtype(spec["dtype"]))
        t = t.reshape(spec["shape"])
        return t.cuda() if self.device else t

    def _random(self, spec):
        if not self.device or self.library is None:
            raise WorkerError(f"input {spec['name']}: drawn on the device, but this worker has no device generator")
        r = spec["random"]
        t = self.torch.empty(spec["shape"], dtype=self._torch_dtype(spec["dtype"]), device="cuda")
        pages = None
        if r.get("pages_file"):
            pages = (ctypes.c_uint8 * r["num_pages"]).from_buffer_copy(Path(r["pages_file"]).read_bytes())
        fill = _RandomFill(r["kind"], _DTYPES[spec["dtype"]][2], r["numel"], r["seed"], r["stream"], r["scale"],
                           r["row"], ctypes.addressof(pages) if pages is not None else None,
                           r.get("num_pages", 0), r.get("page_elems", 0))
        s = self.library.lib.kindex_gpu_reference_fill_random(ctypes.byref(fill), ctypes.c_void_p(t.data_ptr()),
                                                             ctypes.c_void_p(self._stream()))
        if s != 0:
            self.library.error("kindex_gpu_reference_fill_random", s)
        return t

    def _stream(self):
        return self.torch.cuda.current_stream().cuda_stream if self.device else 0

    def _empty(self, spec):
        if self.torch is None:
            return HostTensor(spec["dtype"], spec["shape"])
        # Filled with 0xFF bytes (a NaN for floats) as the native runs' outputs are: an output never written fails.
        t = self.torch.empty(spec["shape"], dtype=self._torch_dtype(spec["dtype"]),
                             device="cuda" if self.device else "cpu")
        if t.numel():
            t.view(-1).view(self.torch.uint8).fill_(0xFF)
        return t

    def _sync(self):
        if self.device:
            self.torch.cuda.synchronize()

    def _unfilled(self, spec):
        if self.torch is None:
            return HostTensor(spec["dtype"], spec["shape"])
        return self.torch.empty(spec["shape"], dtype=self._torch_dtype(spec["dtype"]),
                                device="cuda" if self.device else "cpu")

    def _arguments(self, specs):
        args = []
        for spec in specs:
            if "scalar" in spec:
                args.append(spec["scalar"])
            elif "random" in spec:
                args.append(self._random(spec))
            elif spec.get("unfilled"):
                args.append(self._unfilled(spec))
            else:
                args.append(self._from_file(spec))
        return args

    def prepare(self, req):
        _, dps, plan, _ = self.loaded[req["key"]]
        before = self._compile_cache()
        planned = 0
        for call in req["calls"] if plan is not None else []:
            args = self._arguments(call["inputs"])
            if dps:
                args += [self._unfilled(spec) for spec in call["outputs"]]
            plan(*args)
            planned += 1
            del args
            if self.device:  # the unfilled tensors' memory goes back now, for the implementations measured meanwhile
                self._sync()
                self.torch.cuda.empty_cache()
        after = self._compile_cache()
        return {"planned": planned, "compile_cache": {k: after[k] - before[k] for k in after}}

    @staticmethod
    def _compile_cache():
        """torch.compile's on-disk cache hits and misses so far in this process, one per compiled graph: Inductor's
        FX graph cache or AOTAutograd's in front of it (a hit there may load the FX graph without counting it),
        whichever counted more; 0 and 0 where torch compiled nothing."""
        dynamo = sys.modules.get("torch._dynamo.utils")
        counters = getattr(dynamo, "counters", {}) if dynamo else {}
        inductor, aot = counters.get("inductor", {}), counters.get("aot_autograd", {})
        return {"hits": max(inductor.get("fxgraph_cache_hit", 0), aot.get("autograd_cache_hit", 0)),
                "misses": max(inductor.get("fxgraph_cache_miss", 0), aot.get("autograd_cache_miss", 0))}

    def round(self, req):
        entry, dps, plan, name = self.loaded[req["key"]]
        args = self._arguments(req["inputs"])
        outputs = [self._empty(spec) for spec in req["outputs"]] if dps else None
        self._sync()
        call_args = args + outputs if dps else args
        plan_s = None
        if plan is not None:
            t0 = time.perf_counter()
            plan(*call_args)
            self._sync()
            plan_s = time.perf_counter() - t0
        result = entry(*call_args)
        self._sync()
        if not dps:
            outputs = list(result) if isinstance(result, (tuple, list)) else [result]
        if len(outputs) != len(req["outputs"]):
            raise WorkerError(f"solution {name} gave {len(outputs)} outputs; the definition has "
                              f"{len(req['outputs'])} ({', '.join(o['name'] for o in req['outputs'])})")
        handed = [(got, spec) for got, spec in zip(outputs, req["outputs"]) if "ipc" in spec]
        for got, spec in zip(outputs, req["outputs"]):
            if "ipc" not in spec:
                self._write_output(got, spec, name)
        if handed:
            self._hand_over(handed, name)
        self.last = (entry, args, outputs, dps)
        return {"plan_s": plan_s}

    def _hand_over(self, handed, name):
        """Copies each output into the runner's buffer (CUDA IPC), mapped for this copy only: the runner's buffers
        live as long as its run, so no mapping outlives what it maps."""
        torch = self.torch
        if not self.device or self.library is None:
            raise WorkerError("outputs handed over on the device, but this worker has no device library")
        mapped = []
        try:
            for got, spec in handed:
                if not isinstance(got, torch.Tensor):
                    raise WorkerError(f"solution {name}: output {spec['name']} is a {type(got).__name__}, not a tensor")
                self._check_output(got, spec, name)
                if not spec["ipc"]:
                    continue  # an empty tensor: nothing to copy
                nbytes = got.numel() * got.element_size()
                ptr = self.library.ipc_open(spec["ipc"])
                mapped.append(ptr)
                dst = torch.as_tensor(_DeviceBytes(ptr, nbytes), device=got.device)
                dst.view(got.dtype).view(got.shape).copy_(got)
                del dst
        finally:
            if mapped:
                try:
                    self._sync()  # the copies are done before their mappings go (an error here is the round's)
                finally:
                    for ptr in mapped:
                        self.library.ipc_close(ptr)

    def _write_output(self, got, spec, name):
        """The output's bytes to its file: a device tensor through one host copy and numpy's tofile (no bytes
        object: L2/003's outputs are ~100 MB a round)."""
        torch = self.torch
        if torch is not None and isinstance(got, torch.Tensor) and got.numel():
            self._check_output(got, spec, name)
            got.detach().contiguous().cpu().view(-1).view(torch.uint8).numpy().tofile(spec["file"])
        else:
            Path(spec["file"]).write_bytes(self._output_bytes(got, spec, name))

    def _check_output(self, got, spec, name):
        where = f"solution {name}: output {spec['name']}"
        if got.dtype != self._torch_dtype(spec["dtype"]) or list(got.shape) != list(spec["shape"]):
            raise WorkerError(f"{where} is {str(got.dtype).replace('torch.', '')} {list(got.shape)}; expected "
                              f"{spec['dtype']} {spec['shape']}")

    def _output_bytes(self, got, spec, name):
        where = f"solution {name}: output {spec['name']}"
        if isinstance(got, HostTensor):
            if got.dtype != spec["dtype"] or list(got.shape) != list(spec["shape"]):
                raise WorkerError(f"{where} is {got.dtype} {list(got.shape)}; expected {spec['dtype']} {spec['shape']}")
            return got.tobytes()
        torch = self.torch
        if torch is None or not isinstance(got, torch.Tensor):
            raise WorkerError(f"{where} is a {type(got).__name__}, not a tensor")
        self._check_output(got, spec, name)
        return got.detach().contiguous().cpu().view(-1).view(torch.uint8).numpy().tobytes() if got.numel() else b""

    def time(self, req):
        if self.last is None:
            raise WorkerError("time before any round")
        entry, args, outputs, dps = self.last
        p = req["protocol"]
        current = list(args)
        call_no = [0]
        pools = {}
        calls = p["untimed"] + p["warmup"] + p["iterations"]
        if req.get("fresh_addresses") and self.device:
            torch = self.torch
            for i, a in enumerate(args):
                if isinstance(a, torch.Tensor):
                    pools[i] = torch.empty(a.numel() * a.element_size() + 256 * calls, dtype=torch.uint8,
                                           device=a.device)

        def prepare():
            if pools:
                offset = 256 * call_no[0]
                for i, pool in pools.items():
                    a = args[i]
                    view = pool[offset:offset + a.numel() * a.element_size()].view(a.dtype).view(a.shape)
                    view.copy_(a)
                    current[i] = view
                call_no[0] += 1

        def call():
            entry(*(current + outputs if dps else current))

        if not self.device:
            for _ in range(p["untimed"] + p["warmup"]):
                prepare()
                call()
            ns = []
            for _ in range(p["iterations"]):
                prepare()
                t0 = time.perf_counter_ns()
                call()
                ns.append(float(time.perf_counter_ns() - t0))
            return {"ns": ns, "timer": "wall_clock", "note": ""}
        if self.library is None or self.library.time_calls is None:
            raise WorkerError("no kindex_gpu_reference_time_calls in libkindex_gpu_reference.so: the runner's timer "
                              "is needed to time a solution")
        failure = []

        def guarded(fn):
            def callback(_user):
                try:
                    fn()
                    return 0
                except BaseException as e:  # noqa: BLE001 (an exception must not cross the C frames)
                    failure.append(e)
                    return 1
            return _CALLBACK(callback)

        prepare_cb, call_cb = guarded(prepare), guarded(call)
        protocol = _TimingProtocol(p["untimed"], p["warmup"], p["iterations"], int(p["cold_l2"]),
                                   int(p["prefer_cupti"]))
        ns = (ctypes.c_double * p["iterations"])()
        timer, note = ctypes.create_string_buffer(32), ctypes.create_string_buffer(512)
        s = self.library.time_calls(ctypes.byref(protocol), prepare_cb, call_cb, None, ctypes.c_void_p(self._stream()),
                                    ns, timer, len(timer), note, len(note))
        if failure:
            raise failure[0]
        if s != 0:
            self.library.error("kindex_gpu_reference_time_calls", s)
        return {"ns": list(ns), "timer": timer.value.decode(), "note": note.value.decode()}


def _failure(worker, e):
    text = f"{type(e).__name__}: {e}" if not isinstance(e, WorkerError) else str(e)
    sticky = getattr(e, "sticky", False) or _is_sticky(text)
    status = getattr(e, "status", "runtime_error")
    if "out of memory" in text.lower():
        status = "resource_exceeded"
    if not isinstance(e, WorkerError):
        frames = traceback.extract_tb(e.__traceback__)
        if frames:
            last = frames[-1]
            text += f" (at {Path(last.filename).name}:{last.lineno})"
    if worker.device and worker.torch is not None and not sticky:
        try:  # an asynchronous CUDA error shows here; the context may be unusable after it
            worker.torch.cuda.synchronize()
        except Exception as sync_error:  # noqa: BLE001
            text += f"; then: {sync_error}"
            sticky = sticky or _is_sticky(str(sync_error))
    return {"ok": False, "status": status, "message": text, "sticky": sticky}


def main():
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the solution's prints go to stderr
    sys.stdout = sys.stderr
    worker = Worker()
    ops = {"probe": worker.probe, "load": worker.load, "prepare": worker.prepare, "round": worker.round,
           "time": worker.time}
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            op = ops.get(req.get("op"))
            if op is None:
                raise WorkerError(f"unknown op {req.get('op')!r}")
            reply = {"ok": True}
            reply.update(op(req))
        except BaseException as e:  # noqa: BLE001 (SystemExit from a solution too: it is this run's failure)
            reply = _failure(worker, e)
        replies.write(json.dumps(reply) + "\n")
        if not reply["ok"] and reply["sticky"]:
            break


if __name__ == "__main__":
    main()
