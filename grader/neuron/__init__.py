"""The neuron backend: grading on a real NeuronCore, split at the same trust boundary as the
simulator's.

- In the sandboxed child (compile.py): the SDK compiles the kernel into a NEFF on zero inputs;
  only the NEFF file comes back.
- In a trusted process with no student code (`python -I -m grader.neuron`): the NEFF runs on the
  real inputs on the job's NeuronCore (NEURON_RT_VISIBLE_CORES), its outputs are read back and
  its device-side time is taken: legacy.py (SDK 2.26: libnrt + neuron-profile) or current.py
  (SDK 2.32+, where nrtpy first ships: a separate nrtpy interpreter running nrtpy_main.py).
- lines.py detects which line a machine has, and says what is missing when it has neither;
  each line compiles one NKI dialect (legacy: neuronxcc.nki; current: NKI 0.6), and
  check_dialect refuses a spec in the other; check_platform refuses a spec of another
  Trainium generation than the instance's.

docs/trainium.md describes the set-up of each line on a Trn2 instance.
"""
from __future__ import annotations

import numpy as np

from .lines import NeuronSetup, NeuronUnavailable, WrongPlatform, WrongSdkLine, check_dialect, check_platform, detect

__all__ = ["NeuronSetup", "NeuronUnavailable", "WrongPlatform", "WrongSdkLine", "check_dialect", "check_platform",
           "detect", "as_expected"]


def as_expected(output: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """An output read back as raw bytes (uint8, the element bytes last: nrtpy reports no dtype
    for auto-allocated outputs) viewed as the answer's dtype and shape; anything else as is."""
    if (output.dtype == np.uint8 and expected.dtype != np.uint8
            and output.shape == tuple(expected.shape) + (expected.dtype.itemsize,)):
        return np.ascontiguousarray(output).view(expected.dtype).reshape(expected.shape)
    return output
