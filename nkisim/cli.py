"""`nkisim` command line.

    nkisim demo      run the reference kernels through the simulator and check them against NumPy
    nkisim profile   run a kernel file, print its estimated profile on one Trainium generation's
                     model (--platform trn1|trn2|trn3), write a timeline SVG/JSON

The `nkisim` script is reference_kernels.demo:main, which hands this module the demo's cases:
nkisim imports no package of the project (tests/test_layers.py)."""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np


def demo(cases) -> int:
    """Run each case (label, kernel, inputs, kwargs, reference) in the simulator; compare with NumPy."""
    import nkisim
    nkisim.install()
    failures = 0
    print(f"{'kernel':36} {'result':8} {'instructions':>12} {'wall s':>8}")
    for label, kernel, inputs, kwargs, reference in cases():
        start = time.perf_counter()
        run = nkisim.run_kernel(kernel, inputs, kwargs)
        wall = time.perf_counter() - start
        ok = np.allclose(run.outputs, reference(*inputs, **kwargs))
        failures += not ok
        print(f"{label:36} {'ok' if ok else 'WRONG':8} {len(run.trace):12d} {wall:8.2f}")
    print("all reference kernels match NumPy" if not failures else f"{failures} kernel(s) disagree with NumPy")
    return 1 if failures else 0


# course configurations: kernel name, inputs as (shape, dtype) and keyword arguments
def _conv_preset(h, w, dtype, pool):
    return ("fused_conv2d_maxpool", [((1, 256, h, w), dtype), ((256, 256, 3, 3), dtype), ((256,), dtype)],
            {"pool_size": pool})


PRESETS = {f"conv2d-{h}x{w}-{dt}-pool{pool}": _conv_preset(h, w, dt, pool)
           for h, w in ((224, 224), (32, 16)) for dt in ("float32", "float16") for pool in (1, 2)}
PRESETS.update({
    "transpose-1024": ("matrix_transpose", [((1024, 1024), "float32")], {}),
    "transpose-4096": ("matrix_transpose", [((4096, 4096), "float32")], {}),
    "vector-add-25600": ("vector_add_stream", [((25600,), "float32"), ((25600,), "float32")], {}),
})

# asst4-trainium2's timed-test thresholds (thresholds_version 2025-11-13, as in
# grader/specs/asst4-trainium2.toml), drawn on the timeline of the matching preset timed on trn2
PRESET_THRESHOLD_PLATFORM = "trn2"
_CONV_THRESHOLDS = {(224, "float32"): (4596, 4964), (224, "float16"): (1002, 1365),
                    (32, "float32"): (110, 110), (32, "float16"): (84, 84)}
PRESET_THRESHOLDS = {
    f"conv2d-{h}x{w}-{dt}-pool{pool}": {"optimized": opt, "relaxed": rel} if opt != rel else {"threshold": opt}
    for (h, dt), (opt, rel) in _CONV_THRESHOLDS.items() for w in ((224,) if h == 224 else (16,))
    for pool in (1, 2)}


def _parse_input(text: str):
    shape_text, _, dtype = text.partition(":")
    try:
        shape = tuple(int(s) for s in shape_text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"nkisim profile: bad --input {text!r}: expected SHAPE[:DTYPE] such as 1x256x224x224:float16")
    return shape, dtype or "float32"


def _parse_kwarg(text: str):
    key, sep, value = text.partition("=")
    if not sep:
        raise SystemExit(f"nkisim profile: bad --kwarg {text!r}: expected NAME=VALUE such as pool_size=2")
    try:
        return key, int(value)
    except ValueError:
        return key, value


def _parse_grid(text: str):
    """'2,3' -> (2, 3); 'nc2,4' -> (nl.nc(2), 4); '2' -> 2 (NKI 0.6's kernel[2] takes one int)."""
    from .launch import NcDim
    dims = []
    for token in text.split(","):
        token = token.strip().lower()
        try:
            dims.append(NcDim(int(token[2:])) if token.startswith("nc") else int(token))
        except ValueError:
            raise SystemExit(f"nkisim profile: bad --grid {text!r}: expected sizes such as 2,3 or nc2,4") from None
    return dims[0] if len(dims) == 1 else tuple(dims)


def _load_kernel(path: str, name: str):
    import importlib.util
    import os
    if not os.path.isfile(path):
        raise SystemExit(f"nkisim profile: no such file: {path}")
    spec = importlib.util.spec_from_file_location(f"nkisim_profiled_{os.path.basename(path)[:-3]}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(module)
    if not hasattr(module, name):
        raise SystemExit(f"nkisim profile: {path} has no kernel named {name!r} (use --kernel NAME)")
    return getattr(module, name)


def model_line(platform: str) -> str:
    """Which generation's model timed a run, and whether that model was checked against its
    hardware: the first line of `nkisim profile`'s summary."""
    from .cost import generation
    from .platforms import rules_for
    gen, rules = generation(platform), rules_for(platform)
    chip = rules.hardware.split(",")[0].strip()
    line = f"{chip} ({gen.core}) model"
    if gen.calibrated:
        return f"{line}, calibrated on {gen.calibration}"
    return (f"{line}: NOT calibrated against {chip} hardware; its figures are the documented ones and "
            f"assumptions (nkisim.cost.generations lists each with its source)")


def profile(args) -> int:
    import nkisim
    from nkisim import platforms
    previous = platforms.default_platform()
    # the platform's host-side names (logging.OFF on trn1) exist before the kernel file is imported
    try:
        nkisim.install(platform=args.platform)
        return _profile(args)
    finally:
        if args.platform is not None:
            platforms.set_default_platform(previous)


def _profile(args) -> int:
    import nkisim
    from nkisim import cost
    from nkisim.cost.profile import build_profile, timeline_svg, verdict, write_json
    from nkisim.dialects import CURRENT
    from nkisim.runtime import PLATFORM_TARGETS
    from nkisim.settings import SimSettings
    if args.preset:
        name, specs, kwargs = PRESETS[args.preset]
    else:
        if not args.input:
            raise SystemExit("nkisim profile: give --preset, or the kernel's inputs with --input SHAPE:DTYPE")
        name, specs, kwargs = args.kernel, [_parse_input(t) for t in args.input], {}
    name = args.kernel or name
    kwargs.update(dict(_parse_kwarg(t) for t in args.kwarg))
    kernel = _load_kernel(args.file, name)
    if args.grid:
        from .runtime import as_kernel
        kernel = as_kernel(kernel)[_parse_grid(args.grid)]
    rng = np.random.default_rng(args.seed)
    inputs = [rng.random(shape, dtype=np.float32).astype(dtype) for shape, dtype in specs]
    options = {"additional_compile_opt": "--disable-dge"} if args.disable_dge else {}
    # without --platform, the kernel's own: a legacy @nki.jit(platform_target=...), NKI 0.6's
    # NEURON_PLATFORM_TARGET_OVERRIDE (its only way to name one), else trn2
    settings = None
    if getattr(kernel, "dialect", None) == CURRENT.name:
        from .nki06.kernel import settings_from_environment
        settings = settings_from_environment()
        override = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE")
        if args.platform is not None and override and settings.platform != args.platform:
            raise SystemExit(f"nkisim profile: NEURON_PLATFORM_TARGET_OVERRIDE={override} names {settings.platform} "
                             f"but --platform is {args.platform}: unset one of them, or make them agree")
    if args.platform is not None:
        target = getattr(kernel, "options", {}).get("platform_target")
        if target is not None and PLATFORM_TARGETS.get(target) != args.platform:
            raise SystemExit(f"nkisim profile: {name} is decorated with @nki.jit(platform_target={target!r}) but "
                             f"--platform is {args.platform}: drop one of them, or make them agree")
        settings = SimSettings(platform=args.platform)
    run = nkisim.run_kernel(kernel, inputs, kwargs, settings=settings, compile_options=options)
    platform = run.settings.platform
    timeline = cost.estimate(run, measurement="profile" if args.disable_dge else "bench")    # platform's params
    prof = build_profile(run.trace, timeline)
    line = verdict(prof)
    print(model_line(platform))
    print(f"{args.file}::{name}  {len(run.trace)} instructions")
    print(prof.summary())
    print(f"bottleneck: {line}")
    if args.svg:
        thresholds = PRESET_THRESHOLDS.get(args.preset) if args.preset else None
        if thresholds and platform != PRESET_THRESHOLD_PLATFORM:
            print(f"(the preset's thresholds are {PRESET_THRESHOLD_PLATFORM}'s, not drawn on a {platform} timeline)")
            thresholds = None
        with open(args.svg, "w") as fh:
            fh.write(timeline_svg(run.trace, timeline, title=f"{os.path.basename(args.file)}::{name}",
                                  thresholds_us=thresholds, verdict=line))
        print(f"timeline written to {args.svg}")
    if args.json:
        write_json(prof, args.json)
        print(f"profile written to {args.json}")
    return 0


def main(argv: list[str] | None = None, demo_cases=None) -> int:
    """`demo_cases`: a callable yielding the demo's cases, given by whoever composes the command
    (reference_kernels/demo.py for the `nkisim` script): the simulator knows no kernels of its own."""
    from .platforms import PLATFORMS
    parser = argparse.ArgumentParser(prog="nkisim", description="NKI simulator on NumPy")
    sub = parser.add_subparsers(dest="command", required=True)
    if demo_cases is not None:
        sub.add_parser("demo", help="run the reference kernels and check them against NumPy").set_defaults(
            func=lambda _args: demo(demo_cases))
    p = sub.add_parser("profile", help="estimate a kernel's profile on a Trainium generation's model: "
                       "engine use, MFU, timeline")
    p.add_argument("file", help="the kernel's Python file, e.g. part2/conv2d.py")
    p.add_argument("--kernel", help="kernel function name (default: the preset's)")
    p.add_argument("--preset", choices=sorted(PRESETS), help="a course configuration (inputs and kwargs)")
    p.add_argument("--input", action="append", default=[], metavar="SHAPE[:DTYPE]",
                   help="one per kernel argument, e.g. 1x256x224x224:float16")
    p.add_argument("--kwarg", action="append", default=[], metavar="NAME=VALUE", help="e.g. pool_size=2")
    p.add_argument("--disable-dge", action="store_true",
                   help="static DMA descriptors, as the course's profiling runs compile")
    p.add_argument("--svg", help="write the engine timeline picture here (with the preset's thresholds)")
    p.add_argument("--json", help="write the profile as JSON here")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--platform", choices=sorted(PLATFORMS),
                   help="the generation whose rules and cost model run the kernel: trn1 (Trainium1, NeuronCore-v2), "
                   "trn2 (Trainium2, NeuronCore-v3), trn3 (Trainium3, NeuronCore-v4); default: the kernel's "
                   "@nki.jit(platform_target=...), else trn2")
    p.add_argument("--grid", metavar="DIMS", help="launch as kernel[grid]: comma-separated sizes, ncN for an "
                   "nl.nc(N) dimension (legacy SPMD grids, e.g. nc2,4), or NKI 0.6's logical NeuronCore size (2)")
    p.set_defaults(func=profile)
    p.add_argument("--traceback", action="store_true",
                   help="on an error, print Python's whole traceback (nkisim's own frames too) instead of one line")
    args = parser.parse_args(argv)
    from .errors import NKISimError
    try:
        return args.func(args)
    except NKISimError as err:           # the kernel's own error, at its line: not a traceback of ours
        print(f"nkisim {args.command}: {err}", file=sys.stderr)
        return 1
    except Exception as err:
        if getattr(args, "traceback", False):
            raise
        print(f"nkisim {args.command}: {error_line(err, getattr(args, 'file', None))}", file=sys.stderr)
        return 1


def _beside(filename: str, kernel_file: str | None) -> bool:
    """Whether `filename` is the kernel's file or one beside it (a helper module it imports)."""
    if not kernel_file or not filename or filename.startswith("<"):
        return False
    return os.path.dirname(os.path.abspath(filename)) == os.path.dirname(os.path.abspath(kernel_file))


def error_line(err: BaseException, kernel_file: str | None) -> str:
    """An exception as one line naming the kernel's line that raised it (its innermost frame in
    the kernel's folder), as the grader reports a kernel's error; one with no such frame is
    nkisim's own failure, said so, at its innermost frame."""
    import traceback
    text = " ".join(str(err).split()) or "(no message)"
    if isinstance(err, SyntaxError) and _beside(err.filename or "", kernel_file):
        return f"{os.path.basename(err.filename)}:{err.lineno}: {type(err).__name__}: {' '.join(str(err.msg).split())}"
    frames = traceback.extract_tb(err.__traceback__)
    mine = [f for f in frames if _beside(f.filename, kernel_file)]
    if mine:
        f = mine[-1]
        source = f" ({' '.join(f.line.split())})" if f.line else ""
        return f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}: {type(err).__name__}: {text}{source}"
    at = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    return (f"nkisim failed{at}, not at a line of your kernel: {type(err).__name__}: {text}. This is a bug in "
            "nkisim: rerun with --traceback and report what it prints.")


if __name__ == "__main__":
    sys.exit(main())
