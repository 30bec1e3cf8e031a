"""Starter files handed to students: kernels.py (part 1) and conv2d.py (part 2)."""
