"""Starter files handed to students: kernels.py (part 1) and conv2d.py (part 2), and the
bundled matmul and rmsnorm problems' matmul.py and rmsnorm.py."""
