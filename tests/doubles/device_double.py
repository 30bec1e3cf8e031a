"""The doubles' NeuronCore: executes a NEFF's program on real inputs with nkisim and says how
long the core took, from nkisim's Trn2 cost model (the same numbers the simulator grades with)."""
from __future__ import annotations

import numpy as np

import neff_double as neff


class Loaded:
    def __init__(self, data: bytes) -> None:
        self.header, self.program = neff.decode(data)
        self.inputs = self.header["inputs"]
        self.outputs = self.header["outputs"]

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
