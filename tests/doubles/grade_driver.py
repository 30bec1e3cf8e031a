"""`python -I grade_driver.py FOLDER`: grade FOLDER/conv2d.py against FOLDER/spec.json with the
GradeOptions in FOLDER/options.json, in this interpreter (a Trn2 worker's), and print the report."""
import json
import os
import sys

from grader import spec as specs
from grader.grade import GradeOptions, grade
from grader.submission import submission_from_bytes

folder = sys.argv[1]
with open(os.path.join(folder, "spec.json")) as fh:
    spec = specs.parse(json.load(fh))
with open(os.path.join(folder, "options.json")) as fh:
    options = json.load(fh)
if "neuron_cores" in options:
    options["neuron_cores"] = tuple(options["neuron_cores"])
with open(os.path.join(folder, "conv2d.py"), "rb") as fh:
    submission = submission_from_bytes("conv2d.py", fh.read(), spec)
report = grade(submission, spec, GradeOptions(**options))
print(json.dumps(report.to_json(include_seed=True)))
