"""The known-wrong kernels of reference_kernels/wrong/, in NKI 0.6 (`import nki`): the same
mistakes, for the bundled problems' checks in the current dialect."""
