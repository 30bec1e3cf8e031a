"""The doubles' NEFF file: what a compiler double writes and a runtime double loads.

A real NEFF names its inputs after the kernel's parameters and its outputs output_0, output_1,
... (nrtpy tutorial "debug a NEFF"); this one does too, then carries nkisim's traced program,
which the doubles' device executes."""
from __future__ import annotations

import json

MAGIC = b"NEFF-DOUBLE/1\n"


def _regions(outputs) -> list:
    if isinstance(outputs, dict):
        return [r for v in outputs.values() for r in _regions(v)]
    if isinstance(outputs, (list, tuple)):
        return [r for v in outputs for r in _regions(v)]
    return [outputs]


def encode(program, subgraphs: int = 1) -> bytes:
    """`subgraphs`: how many device events one execution emits (a multi-subgraph NEFF emits
    several: nrtpy-troubleshooting). The header also keeps the logical-NeuronCore degree the
    program was compiled for ("A NEFF compiled for LNC=2 contains PNC-specific instructions for
    each of the two PNCs": nki/get-started/about/lnc)."""
    from nkisim import program as programs
    inputs = sorted((a for a in program.allocs if a.input_index is not None), key=lambda a: a.input_index)
    header = {"kernel": program.kernel, "lnc": program.lnc, "subgraphs": subgraphs,
              "inputs": [{"name": a.name, "shape": list(a.shape), "dtype": a.dtype} for a in inputs],
              "outputs": [{"name": f"output_{i}", "shape": list(r.shape), "dtype": r.dtype}
                          for i, r in enumerate(_regions(program.outputs))]}
    return MAGIC + json.dumps(header).encode() + b"\n" + programs.encode(program)


def decode(data: bytes):
    """(header, program); ValueError for anything that is not a NEFF of ours."""
    from nkisim import program as programs
    if not data.startswith(MAGIC):
        raise ValueError("not a NEFF")
    head, _, body = data[len(MAGIC):].partition(b"\n")
    return json.loads(head), programs.decode(body)
