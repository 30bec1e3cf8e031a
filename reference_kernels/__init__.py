"""Reference NKI kernels for the asst4-trainium2 course and their NumPy ground truth.

- vector_add: vector_add_naive, vector_add_tiled, vector_add_stream, plus the
  factories make_vector_add_tiled(row_chunk) and make_vector_add_stream(free_dim)
- transpose: matrix_transpose (Tensor Engine transpose, two DMAs per strip)
- conv2d_relaxed: fused_conv2d_maxpool, plain row by row (inputs and bias
  reloaded for every output-channel tile and row), standing for the course's
  unoptimized reference
- conv2d_optimized: fused_conv2d_maxpool, blocked, resident weights
- matmul: matmul (C = A @ B; the bundled matmul problem, grader/problems/matmul)
- rmsnorm: rmsnorm (fused RMSNorm; the bundled rmsnorm problem, grader/problems/rmsnorm)
- wrong: known-wrong kernels the bundled problems' `grader problem check` must fail
- numpy_reference: conv2d_maxpool_reference, vector_add_reference,
  transpose_reference (pure NumPy, no NKI import)

The kernel modules import neuronxcc.nki; install the nkisim facade first
(nkisim.install()) when running without the Neuron SDK.
"""
