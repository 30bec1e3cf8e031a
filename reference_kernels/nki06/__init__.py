"""The reference kernels of reference_kernels/, written in the current NKI dialect (NKI 0.6:
`import nki`, `nki.isa as nisa`, `nki.language as nl`).

Each module computes what its legacy namesake computes, bit for bit, with the same DMAs,
matmuls, transposes and copies, tile shapes and DMA sizes, and the simulated latency agrees to
within 2% (0.05% or less on the graded shapes). Where NKI 0.6 lacks the legacy form the closest
one stands in: no PSUM zeroing memset (the first nc_matmul into a PSUM region overwrites it), a
tensor_scalar for the bias add (tensor_tensor does not broadcast a (128, 1) column), and a 2x2
max-pool as a reduce over the trailing axis plus an element-wise max (tensor_reduce reduces
trailing free dimensions only). The vector adds and the transpose trace exactly the legacy
programs.

- vector_add: vector_add_naive, vector_add_tiled, vector_add_stream and the factories
  make_vector_add_tiled(row_chunk), make_vector_add_stream(free_dim)
- transpose: matrix_transpose (Tensor Engine transposes, one load and one store per strip chunk)
- conv2d_relaxed: fused_conv2d_maxpool, row by row (the unoptimized reference's structure)
- conv2d_optimized: fused_conv2d_maxpool, blocked over output rows, resident weights
- matmul, rmsnorm: the bundled matmul and rmsnorm problems' references (the legacy kernels'
  loads, instructions and stores; rmsnorm's gamma broadcast is a DMA here), and wrong/: the
  known-wrong kernels of reference_kernels/wrong

The NumPy ground truth is shared with the legacy kernels (reference_kernels.numpy_reference).
The modules import `nki`; without the Neuron SDK install the nkisim facade first
(nkisim.install()).
"""
