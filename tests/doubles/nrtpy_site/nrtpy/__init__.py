"""Contract double of the `nrtpy` wheel (Neuron runtime 2.34.x Python API), as strict as its
documentation: neuron-runtime/nrtpy/model.rst, tensor.rst, configuration.rst, errors.rst and
index.rst (aws-neuron-sdk). It refuses

- NumPy arrays (or anything else) where NrtpyTensors are required, and unknown keyword arguments
  (plain Python signatures copied from the docs);
- input names that differ from the NEFF's ("Keys must match the NEFF input names"), and tensors
  whose byte size differs from the NEFF's;
- benchmark_iter < 1 and a mode other than "device"/"host" (ValueError);
- a NEFF compiled for another logical-NeuronCore degree than the runtime's (NEURON_LOGICAL_NC_CONFIG,
  else the platform's default: 2 on Trn2, tests/doubles/device_double.runtime_lnc): "Mismatching
  the two will cause a runtime error" (nki/api/generated/nki.jit, SDK 2.31);
- any tensor or model used after reset() ("All existing NrtpyTensor and NrtpyModel objects
  become invalid"), and configure() while the runtime is active (RuntimeError);
- living in one interpreter with the `nki` wheel ("cannot be installed in the same Python
  environment"): importing nrtpy where nki is imported, or nki after nrtpy, fails.

Outputs are real: the NEFF's program runs on nkisim (tests/doubles/device_double.py). As the docs warn,
auto-allocated output tensors come back with a void dtype (`|V2` for fp16): callers view them.
benchmark(mode="device") reports device events, as nrtpy-troubleshooting says it does: a NEFF of
several subgraphs emits that many events per call, and `iterations` counts the events.
"""
from __future__ import annotations

import importlib.abc
import os
import sys
from dataclasses import dataclass

import numpy as np

_HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)          # tests/doubles: the shared NEFF format and device

import device_double as device  # noqa: E402

_CONFLICT = ("the standalone nrtpy wheel and the nki wheel cannot be installed in the same Python "
             "environment (namespace conflict): compile in the NKI environment, execute in the nrtpy one")

if "nki" in sys.modules:
    raise ImportError(_CONFLICT)


class _RefuseNki(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "nki" or name.startswith("nki."):
            raise ImportError(_CONFLICT)
        return None


sys.meta_path.insert(0, _RefuseNki())


class NrtpyError(RuntimeError):
    """nrtpy-level errors (a freed tensor, configure() while active, ...)."""


class NrtError(RuntimeError):
    """libnrt returned a non-success status; the message carries its name and code."""

    def __init__(self, status: str, code: int, what: str) -> None:
        super().__init__(f"NRT Error {status}({code}): {what}")
        self.status, self.code = status, code


class _Runtime:
    """The singleton: created lazily by the first tensor or model, closed by reset()."""
    active = False
    generation = 0
    visible: list[int] | None = None

    @classmethod
    def use(cls) -> int:
        if not cls.active:
            raw = os.environ.get("NEURON_RT_VISIBLE_CORES", "")
            cls.visible = _parse_cores(raw) if raw else list(range(8))
            cls.active = True
        return cls.generation

    @classmethod
    def check_core(cls, core_id) -> None:
        if not isinstance(core_id, int) or isinstance(core_id, bool):
            raise TypeError(f"core_id must be an int, got {type(core_id).__name__}")
        if not 0 <= core_id < len(cls.visible):
            raise NrtError("NRT_INVALID", 2, f"NeuronCore {core_id} is not visible "
                                             f"(NEURON_RT_VISIBLE_CORES shows {len(cls.visible)})")


def _parse_cores(raw: str) -> list[int]:
    cores: list[int] = []
    for part in raw.split(","):
        lo, _, hi = part.partition("-")
        cores.extend(range(int(lo), int(hi or lo) + 1))
    return cores


def configure(visible_cores=None) -> None:
    if _Runtime.active:
        raise RuntimeError("the nrtpy runtime is already active: call nrtpy.reset() first")
    if visible_cores is None:
        return
    if isinstance(visible_cores, int):
        raise TypeError("visible_cores must be an iterable of NeuronCore ids, not an int")
    cores = list(visible_cores)
    if any(not isinstance(c, int) or isinstance(c, bool) for c in cores):
        raise TypeError("visible_cores must hold integers")
    if any(c < 0 for c in cores):
        raise ValueError("NeuronCore ids cannot be negative")
    os.environ["NEURON_RT_VISIBLE_CORES"] = ",".join(map(str, cores))


def reset() -> None:
    if _Runtime.active:
        _Runtime.active = False
        _Runtime.generation += 1


def _alive(generation: int, what: str) -> None:
    if not _Runtime.active or generation != _Runtime.generation:
        raise NrtpyError(f"this {what} belongs to a runtime closed by nrtpy.reset()")


class NrtTensor:
    """The device tensor behind an NrtpyTensor (device memory here is a host bytearray)."""

    def __init__(self, nbytes: int, core_id: int) -> None:
        self.data = bytearray(nbytes)
        self.core_id = core_id
        self.generation = _Runtime.generation


class NrtpyTensor:
    def __init__(self, tensor_ref, shape, dtype, name=None) -> None:
        if not isinstance(tensor_ref, NrtTensor):
            raise TypeError(f"tensor_ref must be an nrtpy.NrtTensor, got {type(tensor_ref).__name__}")
        self._ref = tensor_ref
        self.shape = (int(shape),) if isinstance(shape, int) else tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)
        self.name = name if name is not None else ""
        if int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize != len(tensor_ref.data):
            raise ValueError("shape and dtype do not match the device tensor's size")

    @classmethod
    def from_numpy(cls, array, name=None, core_id=0) -> "NrtpyTensor":
        if not isinstance(array, np.ndarray):
            raise TypeError(f"from_numpy takes a numpy.ndarray, got {type(array).__name__}")
        _Runtime.use()
        _Runtime.check_core(core_id)
        data = np.ascontiguousarray(array)
        ref = NrtTensor(data.nbytes, core_id)
        ref.data[:] = data.tobytes()
        return cls(ref, data.shape, data.dtype, name)

    def write_from_numpy(self, array) -> None:
        _alive(self._ref.generation, "tensor")
        if not isinstance(array, np.ndarray):
            raise TypeError(f"write_from_numpy takes a numpy.ndarray, got {type(array).__name__}")
        data = np.ascontiguousarray(array)
        if data.nbytes != len(self._ref.data):
            raise ValueError(f"the array has {data.nbytes} bytes, the tensor {len(self._ref.data)}")
        self._ref.data[:] = data.tobytes()

    def numpy(self) -> np.ndarray:
        _alive(self._ref.generation, "tensor")
        return np.frombuffer(bytes(self._ref.data), dtype=self.dtype).reshape(self.shape).copy()


@dataclass(frozen=True)
class TensorMetadata:
    shape: list
    size: int


@dataclass
class BenchmarkResult:
    mean_ms: float
    min_ms: float
    max_ms: float
    std_dev_ms: float
    iterations: int
    warmup_iterations: int
    durations_ms: list


class NrtpyModel:
    def __init__(self, loaded: "device.Loaded", name: str, core_id: int, generation: int) -> None:
        self._loaded, self.name, self._core, self._generation = loaded, name, core_id, generation
        self.input_tensors_info = {e["name"]: TensorMetadata(list(e["shape"]), loaded.nbytes(e))
                                   for e in loaded.inputs}
        self.output_tensors_info = {e["name"]: TensorMetadata(list(e["shape"]), loaded.nbytes(e))
                                    for e in loaded.outputs}

    @classmethod
    def load_from_neff(cls, neff_path, name=None, core_id=0, cc_enabled=False, rank_id=0, world_size=1):
        generation = _Runtime.use()
        _Runtime.check_core(core_id)
        try:
            with open(os.fspath(neff_path), "rb") as fh:
                loaded = device.Loaded(fh.read())
        except (OSError, ValueError):
            raise NrtError("NRT_FAILURE", 1, "Failed to load model") from None
        try:
            lnc = device.runtime_lnc()
        except ValueError as err:
            raise NrtError("NRT_INVALID", 2, str(err)) from None
        if loaded.lnc != lnc:
            # the kernel's LNC "must match the NEURON_LOGICAL_NC_CONFIG environment variable set
            # for the Neuron Runtime. Mismatching the two will cause a runtime error" (nki.jit)
            raise NrtError("NRT_FAILURE", 1, f"Failed to load model: the NEFF was compiled for LNC={loaded.lnc} "
                                             f"and the runtime runs at LNC={lnc} (NEURON_LOGICAL_NC_CONFIG)")
        return cls(loaded, name if name is not None else os.path.splitext(os.path.basename(neff_path))[0],
                   core_id, generation)

    def _arrays(self, inputs) -> list[np.ndarray]:
        _alive(self._generation, "model")
        if not isinstance(inputs, dict):
            raise TypeError(f"inputs must be a dict[str, NrtpyTensor], got {type(inputs).__name__}")
        for key, value in inputs.items():
            if not isinstance(value, NrtpyTensor):
                raise TypeError(f"inputs[{key!r}] must be an nrtpy.NrtpyTensor (NrtpyTensor.from_numpy), "
                                f"got {type(value).__name__}")
            _alive(value._ref.generation, "tensor")
        if set(inputs) != set(self.input_tensors_info):
            raise NrtError("NRT_INVALID", 2, f"input tensor names {sorted(inputs)} do not match the NEFF's "
                                             f"{sorted(self.input_tensors_info)}")
        arrays = []
        for entry in self._loaded.inputs:
            tensor = inputs[entry["name"]]
            if len(tensor._ref.data) != self._loaded.nbytes(entry):
                raise NrtError("NRT_INVALID", 2, f"input {entry['name']!r} has {len(tensor._ref.data)} bytes, "
                                                 f"the NEFF takes {self._loaded.nbytes(entry)}")
            arrays.append(device.from_bytes_view(self._loaded, entry["name"], bytes(tensor._ref.data)))
        return arrays

    def _execute(self, inputs, outputs):
        arrays = self._arrays(inputs)
        if outputs is not None:
            if not isinstance(outputs, dict) or any(not isinstance(v, NrtpyTensor) for v in outputs.values()):
                raise TypeError("outputs must be a dict[str, NrtpyTensor] or None")
            if set(outputs) != set(self.output_tensors_info):
                raise NrtError("NRT_INVALID", 2, f"output tensor names {sorted(outputs)} do not match the "
                                                 f"NEFF's {sorted(self.output_tensors_info)}")
        results, trace = self._loaded.run(arrays)
        return results, trace

    def __call__(self, inputs, outputs=None, save_trace=False, ntff_name=None):
        results, _ = self._execute(inputs, outputs)
        if outputs is not None:
            for entry, value in zip(self._loaded.outputs, results):
                outputs[entry["name"]]._ref.data[:] = value.tobytes()
            return None
        made = {}
        for entry, value in zip(self._loaded.outputs, results):
            ref = NrtTensor(value.nbytes, self._core)
            ref.data[:] = value.tobytes()
            # libnrt does not always report the dtype: raw bytes, as the docs warn
            made[entry["name"]] = NrtpyTensor(ref, value.shape, np.dtype(f"V{value.dtype.itemsize}"), entry["name"])
        return made

    def benchmark(self, inputs, outputs=None, warmup_iter=5, benchmark_iter=5, mode="device"):
        if mode not in ("device", "host"):
            raise ValueError(f"mode must be 'device' or 'host', got {mode!r}")
        if not isinstance(benchmark_iter, int) or benchmark_iter < 1:
            raise ValueError(f"benchmark_iter must be at least 1, got {benchmark_iter!r}")
        if not isinstance(warmup_iter, int) or warmup_iter < 0:
            raise ValueError(f"warmup_iter must be a non-negative int, got {warmup_iter!r}")
        _, trace = self._execute(inputs, outputs)
        base_ms = self._loaded.device_us(trace) / 1000.0
        if mode == "host":
            base_ms += 0.035                  # the host-device round trip device mode leaves out
        # a little run-to-run spread, deterministic, so that a percentile differs from a mean
        calls = [base_ms * (1.0 + 0.01 * ((7 * i) % 5)) for i in range(benchmark_iter)]
        # device mode times events, not calls: "Some kernels emit multiple execution events per
        # call (multi-subgraph NEFFs). The reported iterations in BenchmarkResult reflects actual
        # device events, not Python calls" (nrtpy-troubleshooting); here each subgraph of a call
        # takes an equal share of it, one after another
        per_call = self._loaded.subgraphs if mode == "device" else 1
        durations = [c / per_call for c in calls for _ in range(per_call)]
        mean = float(np.mean(durations))
        return BenchmarkResult(mean_ms=mean, min_ms=min(durations), max_ms=max(durations),
                               std_dev_ms=float(np.std(durations)), iterations=len(durations),
                               warmup_iterations=warmup_iter, durations_ms=durations)


__all__ = ["NrtpyModel", "NrtpyTensor", "NrtTensor", "BenchmarkResult", "TensorMetadata", "NrtpyError",
           "NrtError", "configure", "reset"]
