"""Starter files handed to students, in NKI 0.6 (import nki): kernels.py (part 1) and conv2d.py (part 2)."""
