"""What both compile doubles share: compile a kernel on the doubles' "device" (trace it with
nkisim, then run it on the arrays it was called with, as the real SDK does) and write the NEFF."""
from __future__ import annotations

import os

import numpy as np

import neff_double


def check_arrays(args, kwargs, who: str) -> None:
    for value in list(args) + list(kwargs.values()):
        if hasattr(value, "shape") and not isinstance(value, np.ndarray):
            raise TypeError(f"{who} expects numpy.ndarray inputs, got {type(value).__name__}")


def compile_and_run(kernel, args, kwargs, neff_path: str | None, compile_options: dict, settings=None,
                    before_run=None):
    """`settings`: nkisim's SimSettings of the run (the platform NKI 0.6 reads from the
    environment); None: nkisim's defaults (Trainium2). `before_run(program)`: what the runtime
    checks when it loads the compiled program, after it is compiled (and its NEFF kept)."""
    from nkisim.runtime import as_kernel, flat_arrays, trace_kernel
    from nkisim.execute import execute
    program, _ = trace_kernel(as_kernel(kernel), args, kwargs, settings, compile_options=compile_options)
    if neff_path:
        with open(neff_path, "wb") as fh:
            fh.write(neff_double.encode(program))
    if before_run is not None:
        before_run(program)
    with np.errstate(all="ignore"):
        return execute(program, flat_arrays(args, kwargs)).outputs


def here_on_path() -> None:
    import sys
    doubles = os.path.dirname(os.path.abspath(__file__))
    if doubles not in sys.path:
        sys.path.insert(0, doubles)
