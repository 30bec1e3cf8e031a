"""NumPy dtypes from the names that specs, jobs and shared memory carry ('float16', 'bfloat16').

NumPy reads bfloat16 and the float8 names only once ml_dtypes is loaded, and nothing else the
grader imports loads it for sure; every name the grader turns back into a dtype goes through
`dtype_of`, so no module depends on another having loaded it first."""
import ml_dtypes  # noqa: F401  (registers its names with NumPy)
import numpy as np


def dtype_of(name) -> np.dtype:
    """The NumPy dtype of a name ('bfloat16', 'float8_e4m3fn', ...) or of a dtype."""
    return np.dtype(name)
