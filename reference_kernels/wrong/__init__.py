"""Known-wrong kernels for the bundled problems' `grader problem check` (grader/problems/*/
problem.toml names them under [solutions] wrong): each is a plausible mistake, and the check
fails the folder if one of them earns a point it should not. They live outside grader/ for the
reason the reference kernels do: the Gradescope wheel ships grader/, which students can read.

- matmul_drops_last_k: the K loop stops one tile short
- matmul_bf16_operands: float32 inputs multiplied as bfloat16 (faster, and less precise)
- rmsnorm_no_eps: eps left out of the root mean square
- rmsnorm_mean_not_square: mean(x) where mean(x^2) belongs
"""
