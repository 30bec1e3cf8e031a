"""Contract double of `neuron-profile` (aws-neuronx-tools), the two subcommands and the options
the CLI reference documents (tools/profiler/neuron-profile-user-guide.rst):

    neuron-profile capture -n,--neff NEFF -s,--session-file NTFF [--ignore-exec-errors] [NAME FILE ...]
    neuron-profile view -n,--neff-path NEFF -s,--session-file NTFF --output-format FORMAT [--output-file F]

Unknown options are refused (exit 2); capture executes the NEFF once on the named inputs (all
zeros when none are given), refusing input names the NEFF does not have and files of the wrong
size, and records the NeuronCore time of that execution (nkisim's cost model, with the profile
overhead measured on Trn2); view prints it back (`total_time`, in seconds)."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import device_double  # noqa: E402


def _capture(args) -> int:
    with open(args.neff, "rb") as fh:
        data = fh.read()
    try:
        loaded = device_double.Loaded(data)
    except Exception:
        print(f"ERROR: {args.neff} is not a valid NEFF", file=sys.stderr)
        return 1
    if len(args.inputs) % 2:
        print("ERROR: inputs are NAME FILE pairs", file=sys.stderr)
        return 2
    given = dict(zip(args.inputs[::2], args.inputs[1::2]))
    names = {e["name"] for e in loaded.inputs}
    for name in given:
        if name not in names:
            print(f"ERROR: the NEFF has no input named {name!r} (it has {', '.join(sorted(names))})", file=sys.stderr)
            return 1
    arrays = []
    for e in loaded.inputs:
        if e["name"] in given:
            arr = np.load(given[e["name"]], allow_pickle=False)
            if arr.nbytes != loaded.nbytes(e):
                print(f"ERROR: {given[e['name']]} has {arr.nbytes} bytes, input {e['name']} takes "
                      f"{loaded.nbytes(e)}", file=sys.stderr)
                return 1
            arrays.append(np.ascontiguousarray(arr).view(loaded.dtype(e)).reshape(e["shape"]))
        else:
            arrays.append(np.zeros(e["shape"], dtype=loaded.dtype(e)))
    try:
        _, trace = loaded.run(arrays)
    except Exception as err:
        if not args.ignore_exec_errors:
            print(f"ERROR: execution failed: {err}", file=sys.stderr)
            return 1
        trace = []
    core = int((os.environ.get("NEURON_RT_VISIBLE_CORES") or "0").split(",")[0].split("-")[0])
    session = {"ntff": "double", "neff_sha256": hashlib.sha256(data).hexdigest(),
               "total_time": loaded.device_us(trace, profile=True) / 1e6, "nc_idx": core, "nd_idx": core // 8,
               "event_count": len(trace)}
    with open(args.session_file, "w") as fh:
        json.dump(session, fh)
    return 0


def _view(args) -> int:
    with open(args.neff_path, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    with open(args.session_file) as fh:
        session = json.load(fh)
    if session.get("neff_sha256") != digest:
        print("ERROR: the profile was not captured from this NEFF", file=sys.stderr)
        return 1
    summary = {k: session[k] for k in ("total_time", "nc_idx", "nd_idx", "event_count")}
    if args.output_format == "summary-json":
        text = json.dumps({"summary": [summary]})
    elif args.output_format == "summary-text":
        text = "\n".join(f"{k:<12}{v}" for k, v in summary.items())
    else:
        print(f"ERROR: --output-format {args.output_format} needs InfluxDB or Perfetto, not in this double",
              file=sys.stderr)
        return 1
    if args.output_file:
        with open(args.output_file, "w") as fh:
            fh.write(text)
    else:
        print(text)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="neuron-profile")
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("capture")
    c.add_argument("-n", "--neff", required=True)
    c.add_argument("-s", "--session-file", default="profile.ntff")
    c.add_argument("--ignore-exec-errors", action="store_true")
    c.add_argument("inputs", nargs="*")
    v = sub.add_parser("view")
    v.add_argument("-n", "--neff-path", required=True)
    v.add_argument("-s", "--session-file", required=True)
    v.add_argument("--output-format", default="db",
                   choices=("db", "summary-text", "summary-json", "perfetto", "json"))
    v.add_argument("--output-file")
    args = parser.parse_args(argv)
    return _capture(args) if args.command == "capture" else _view(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
