"""Row softmax: the course's reference (NumPy only)."""
import numpy as np


def make_inputs(config, rng):
    rows, d = config["rows"], config["d"]
    # Each row has a scale and a shift of its own: shifts up to 100 overflow exp() in float32
    # unless the row's max is subtracted first, and the small scales keep the answer far from
    # one-hot on many rows.
    scale = 10.0 ** rng.uniform(-0.5, 1.0, size=(rows, 1))
    shift = rng.uniform(-20.0, 100.0, size=(rows, 1))
    x = rng.standard_normal((rows, d)) * scale + shift
    return [x.astype(config["dtype"])], {}


def reference(inputs, kwargs):
    (x,) = inputs
    x = x.astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(inputs[0].dtype)


def work(config):
    rows, d = config["rows"], config["d"]
    size = 4 if config["dtype"] == "float32" else 2
    return 0, 2 * rows * d * size


def output(config):
    return (config["rows"], config["d"]), config["dtype"]
