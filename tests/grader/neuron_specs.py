"""A small assignment for the hardware-path tests: one correctness and one timed conv2d test, in
each SDK line's dialect."""
SMALL_SPEC = {
    "assignment": "small-conv", "spec_version": "t1", "thresholds_version": "t1", "partial_credit": 0.95,
    "files": {"conv2d": {"archive_path": "part2/conv2d.py",
                         "functions": {"fused_conv2d_maxpool": ["X", "W", "bias", "pool_size"]}}},
    "tolerances": {"float32": {"rtol": 1e-5, "atol": 1e-8}, "float16": {"rtol": 1e-2, "atol": 1e-1}},
    "tests": [
        {"name": "small", "kind": "correctness", "file": "conv2d", "problem": "conv2d", "points": 2,
         "configs": [{"batch": 1, "c_in": 128, "c_out": 128, "height": 10, "width": 10, "k": 3, "bias": True,
                      "pool": 2, "dtype": "float32"}]},
        {"name": "perf", "kind": "performance", "file": "conv2d", "problem": "conv2d", "points": 4,
         "gated_by": ["small"], "thresholds_us": {"optimized": 1000, "relaxed": 2000}, "warmup": 2, "iters": 5,
         "configs": [{"batch": 1, "c_in": 128, "c_out": 128, "height": 10, "width": 10, "k": 3, "bias": True,
                      "pool": 1, "dtype": "float16"}]},
    ]}


# the same assignment in NKI 0.6 (`import nki`), the only dialect the current SDK line compiles
SMALL_SPEC_NKI06 = dict(SMALL_SPEC, assignment="small-conv-nki06", dialect="nki-0.6")
