"""Kernels the contest tests grade: our own relaxed conv2d reference (honest) and three
cheats written from it, each a source edit that the assertions below check took place.

- distinguishing: does one output row less whenever the image is taller than the correctness
  configurations' (8 rows), i.e. on the timed benchmark only;
- low_precision: rounds every operand it copies to float16 (the contest's float32 tolerance is
  loose enough for that; only the downgrade check tells);
- replay: keeps its output in a module global and returns it again on any later call."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HONEST = (ROOT / "reference_kernels" / "conv2d_relaxed.py").read_text()
FASTER = (ROOT / "reference_kernels" / "conv2d_optimized.py").read_text()
ENTRY = "@nki.compiler.skip_middle_end_transformations\n@nki.jit\ndef fused_conv2d_maxpool("


def _edit(source: str, old: str, new: str) -> str:
    assert source.count(old) == 1, f"the reference kernel changed: {old!r} is not there once"
    return source.replace(old, new)


ROWS = "            for hp in nl.affine_range(out_pool_height):\n"
DISTINGUISHING = _edit(HONEST, ROWS, "            for hp in nl.affine_range(out_pool_height if input_height <= 8 "
                                     "else out_pool_height - 1):\n")

# weights and image rows pass through float16 once staged in SBUF (values only, no patching:
# the static precheck refuses a patched nisa before anything runs)
LOW_PRECISION = _edit(_edit(HONEST, "= nisa.tensor_copy(block_t)\n",
                            "= nisa.tensor_copy(nisa.tensor_copy(block_t, dtype=nl.float16))\n"),
                      "                    bias_sb = nl.ndarray(",
                      "                    for ci in nl.affine_range(n_ci):\n"
                      "                        for kh in nl.affine_range(K):\n"
                      "                            x_rows[:, ci, kh, :] = nisa.tensor_copy(nisa.tensor_copy(\n"
                      "                                x_rows[:, ci, kh, :], dtype=nl.float16))\n"
                      "                    bias_sb = nl.ndarray(")
# returns an output it never wrote on every call but the first in its process, so it would
# hand back whatever an earlier run left in the output buffer, if the grader let that through
UNWRITTEN = _edit(HONEST, "    batch_size, in_channels, input_height, input_width = X.shape\n",
                  "    batch_size, in_channels, input_height, input_width = X.shape\n"
                  "    if input_height > 8:\n"
                  "        return nl.ndarray(shape=(X.shape[0], W.shape[0], input_height - W.shape[2] + 1,\n"
                  "                                 X.shape[3] - W.shape[2] + 1), dtype=X.dtype, buffer=nl.hbm)\n")

RETURN = "    return X_out\n"
REPLAY = _edit(_edit(HONEST, ENTRY, "_EARLIER = []     # outputs of earlier calls\n\n\n" + ENTRY),
               "    batch_size, in_channels, input_height, input_width = X.shape\n",
               "    if _EARLIER:\n        return _EARLIER[0]\n"
               "    batch_size, in_channels, input_height, input_width = X.shape\n")
REPLAY = _edit(REPLAY, RETURN, "    _EARLIER.append(X_out)\n" + RETURN)

KERNELS = {"honest": HONEST, "faster": FASTER, "distinguishing": DISTINGUISHING,
           "low_precision": LOW_PRECISION, "replay": REPLAY, "unwritten": UNWRITTEN}
