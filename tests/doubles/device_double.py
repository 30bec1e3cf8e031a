"""The doubles' NeuronCore: executes a NEFF's program on real inputs with nkisim and says how
long the core took, from nkisim's Trn2 cost model (the same numbers the simulator grades with)."""
from __future__ import annotations

import os

import numpy as np

import neff_double as neff


TRN1_FAMILIES = (2, 3, 4, 7)          # nrt.h NRT_INSTANCE_TRN1, _TRN1N, _INF2, _INF2E; 5 is _TRN2
TRN3_FAMILIES = (14, 15)              # nrt.h NRT_INSTANCE_TRN3, _TRN3PDS98


def family() -> int:
    """The doubles' instance family (nrt.h NRT_INSTANCE_*): NRT_DOUBLE_FAMILY, else Trn2 (5)."""
    return int(os.environ.get("NRT_DOUBLE_FAMILY", "5"))


def size() -> int:
    """The doubles' instance size (nrt.h NRT_INSTANCE_SIZE_*, 0 = xlarge ... 7 = 48xlarge, 8 = 3xlarge):
    NRT_DOUBLE_SIZE, else 48xlarge (7)."""
    return int(os.environ.get("NRT_DOUBLE_SIZE", "7"))


def runtime_lnc() -> int:
    """The runtime's logical-NeuronCore degree: "The NEURON_LOGICAL_NC_CONFIG runtime environment
    variable controls how many physical NeuronCores are grouped"; "LNC can only be set to 1 or
    2"; "LNC=2 (default)" on Trn2; "LNC applies only to Trn2 and Trn3 instances"
    (about-neuron/arch/neuron-features/logical-neuroncore-config)."""
    trn1 = family() in TRN1_FAMILIES
    raw = os.environ.get("NEURON_LOGICAL_NC_CONFIG", "")
    if not raw:
        return 1 if trn1 else 2
    if raw not in ("1", "2") or (raw == "2" and trn1):
        raise ValueError(f"NEURON_LOGICAL_NC_CONFIG={raw} is not supported on this instance")
    return int(raw)


class Loaded:
    def __init__(self, data: bytes) -> None:
        self.header, self.program = neff.decode(data)
        self.inputs = self.header["inputs"]
        self.outputs = self.header["outputs"]
        self.lnc = int(self.header.get("lnc", 1))             # what it was compiled for
        self.subgraphs = int(self.header.get("subgraphs", 1))   # device events per execution

    def dtype(self, entry: dict) -> np.dtype:
        from nkisim import dtypes
        return dtypes.to_dtype(entry["dtype"])

    def nbytes(self, entry: dict) -> int:
        return int(np.prod(entry["shape"], dtype=np.int64)) * self.dtype(entry).itemsize

    def run(self, arrays: list[np.ndarray]) -> tuple[list[np.ndarray], list]:
        """Outputs (in NEFF order) and the executed trace."""
        from nkisim.execute import execute
        with np.errstate(all="ignore"):
            done = execute(self.program, arrays)
        outs = done.outputs
        if isinstance(outs, dict):
            outs = list(outs.values())
        elif not isinstance(outs, (list, tuple)):
            outs = [outs]
        return [np.ascontiguousarray(o) for o in outs], done.trace

    def device_us(self, trace, *, profile: bool = False) -> float:
        from nkisim import cost
        params = cost.DEFAULT_PARAMS
        overhead = params.profile_overhead_ns if profile else None
        return cost.time_trace(trace, self.program.allocs, dge=cost.uses_dge(self.program.compile_options),
                               params=params, overhead_ns=overhead).total_us


def from_bytes_view(loaded: Loaded, name: str, raw: bytes) -> np.ndarray:
    entry = next(e for e in loaded.inputs if e["name"] == name)
    return np.frombuffer(raw, dtype=loaded.dtype(entry)).reshape(entry["shape"])
