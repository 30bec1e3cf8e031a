"""Assignment specs: each bundled spec's content hash is pinned to its versions, so a spec
changed without bumping its version fails here; loading by name or path; clear errors."""
from __future__ import annotations

import dataclasses
import hashlib
import tomllib

import pytest

import grader
from grader import spec as specs
from nkisim.dialects import CURRENT, LEGACY

# (spec_version, thresholds_version, sha256 of the TOML file). A failure here means a spec file
# changed: bump its spec_version (and thresholds_version too if a threshold changed), then put
# the new versions and hash here. Reports record all three, so a changed spec must say so.
PINNED = {
    "asst4-trainium2": ("3", "2025-11-13", "8b117ff7fea781ceec28acebe70931d7e68847f6bff9ef8e70a7f18173c73a2e"),
    "asst4-trainium": ("4", "2024-fall", "8e67bf2b07956f6472b67ef8b4c008febc8e6b372be16227002afc7c5129ed55"),
    "asst4-trainium2-nki06": ("1", "2025-11-13",
                              "a277b85d789d0a51a9dae40c2c349dd90b5ada34165b05c3aebc1df94765091e"),
    "asst4-trainium3-nki06": ("1", "2026-12-01-v4-model",
                              "9457b1a3e74ed26e04c80792bab2761bcfdbafaa240f1d7c3dcfd9b2a2a8c5e6"),
}


@pytest.mark.parametrize("name", specs.available())
def test_each_bundled_spec_is_pinned_to_its_versions(name):
    assert name in PINNED, f"{name} is a new bundled spec: pin its versions and hash in PINNED"
    raw = (specs.SPEC_DIR / f"{name}.toml").read_bytes()
    spec = grader.load_spec(name)
    digest = hashlib.sha256(raw).hexdigest()
    assert spec.spec_hash == digest
    assert (spec.spec_version, spec.thresholds_version, digest) == PINNED[name], (
        f"{name}.toml changed: bump spec_version (and thresholds_version if a threshold changed), "
        f"then pin ({spec.spec_version!r}, {spec.thresholds_version!r}, {digest!r})")


def test_every_bundled_spec_has_a_budget_and_the_assignments_maxima():
    spec = grader.load_spec("asst4-trainium2")
    assert 60 <= spec.config_timeout_s < spec.time_budget_s <= 600     # a spinning kernel ends in minutes
    assert (spec.max_points("correctness"), spec.max_points("performance"), spec.max_points("extra_credit")) == \
        (20, 50, 6)
    assert spec.tolerance("float32") == {"rtol": 1e-5, "atol": 1e-8}     # timed runs as correctness runs
    assert grader.load_spec("asst4-trainium").time_budget_s > 0


def test_a_spec_file_path_loads_like_a_name(tmp_path):
    raw = (specs.SPEC_DIR / "asst4-trainium2.toml").read_bytes()
    copy = tmp_path / "my-course.toml"
    copy.write_bytes(raw.replace(b'thresholds_version = "2025-11-13"', b'thresholds_version = "mine"'))
    spec = grader.load_spec(str(copy))
    assert spec.thresholds_version == "mine" and spec.spec_hash == hashlib.sha256(copy.read_bytes()).hexdigest()
    assert spec.spec_hash != grader.load_spec("asst4-trainium2").spec_hash


@pytest.mark.parametrize("edit, reason", [
    (lambda d: d.pop("tolerances"), "missing 'tolerances'"),
    (lambda d: d["tests"][0].update(problem="fft"), "problem must be one of ('conv2d', 'matmul', 'rmsnorm', 'transpose')"),
    (lambda d: d["tests"][0]["configs"][0].pop("c_in"), "configs[0] lacks c_in"),
    (lambda d: d["tests"][0]["configs"][0].update(dtype="bfloat16"), "uses dtype 'bfloat16', which has no entry"),
    (lambda d: d.update(time_budget_s=0), "time_budget_s must be a positive number"),
    (lambda d: d["tests"][4]["thresholds_us"].update(optimized=9999), "must not exceed the relaxed one"),
])
def test_a_malformed_spec_says_what_and_where(edit, reason):
    data = tomllib.loads((specs.SPEC_DIR / "asst4-trainium2.toml").read_text())
    edit(data)
    with pytest.raises(grader.SpecError) as info:
        specs.parse(data, "course.toml")
    assert reason in str(info.value) and "course.toml" in str(info.value)
    assert isinstance(info.value, grader.GraderInputError) and info.value.remedy


@pytest.mark.parametrize("name, reason", [("asst9", "unknown assignment 'asst9'"),
                                          ("missing/spec.toml", "cannot read the spec file missing/spec.toml")])
def test_unknown_names_and_paths_are_input_errors(name, reason):
    with pytest.raises(grader.GraderInputError) as info:
        grader.load_spec(name)
    assert reason in info.value.reason and "asst4-trainium2" in info.value.remedy


def test_bad_toml_is_an_input_error(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("assignment = \n")
    with pytest.raises(grader.SpecError, match="broken.toml is not valid TOML"):
        grader.load_spec(str(path))


def test_a_spec_from_toml_text_is_the_spec_from_its_file():
    """One builder: the text's hash is the file's, and the spec keeps its text to be stored."""
    path = specs.SPEC_DIR / "asst4-trainium2.toml"
    text = path.read_text(encoding="utf-8")
    spec = grader.spec_from_toml(text)
    assert spec == specs.load("asst4-trainium2") and spec.toml == text
    assert spec.spec_hash == hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(grader.SpecError, match="course.toml is not valid TOML"):
        grader.spec_from_toml("tests = [", "course.toml")


def test_new_thresholds_make_a_new_spec_with_its_comments_kept():
    spec = specs.load("asst4-trainium2")
    new = grader.spec_with_thresholds(spec, {"perf_224_pool1_float32": {"optimized": 4800, "relaxed": 5000}}, "t9")
    assert new.thresholds_version == "t9" and new.spec_hash != spec.spec_hash
    assert new.thresholds()["perf_224_pool1_float32"] == {"optimized": 4800, "relaxed": 5000}
    assert {k: v for k, v in new.thresholds().items() if k != "perf_224_pool1_float32"} == \
        {k: v for k, v in spec.thresholds().items() if k != "perf_224_pool1_float32"}
    comments = [line for line in spec.toml.splitlines() if line.lstrip().startswith("#")]
    assert comments and all(line in new.toml for line in comments)
    with pytest.raises(grader.SpecError, match="conv_small is not a timed test"):
        grader.spec_with_thresholds(spec, {"conv_small": {"optimized": 1, "relaxed": 2}}, "t9")
    with pytest.raises(grader.SpecError, match="must not exceed the relaxed one"):
        grader.spec_with_thresholds(spec, {"perf_224_pool1_float32": {"optimized": 9, "relaxed": 2}}, "t9")


# ----------------------------------------------------------------------------- the NKI dialect

def test_a_spec_without_a_dialect_is_in_the_legacy_one_and_keeps_its_hash():
    """Every spec written before the key meant neuronxcc.nki; leaving it out changes neither the
    meaning nor the content hash reports recorded (PINNED above holds the hash)."""
    spec = grader.load_spec("asst4-trainium2")
    assert "dialect" not in tomllib.loads(spec.toml)
    assert spec.dialect == LEGACY.name and spec.nki is LEGACY
    assert grader.load_spec("asst4-trainium").dialect == LEGACY.name


def test_the_nki06_spec_names_the_current_dialect():
    spec = grader.load_spec("asst4-trainium2-nki06")
    assert spec.dialect == CURRENT.name == "nki-0.6" and spec.nki is CURRENT
    assert spec.nki.package == "nki" and spec.nki.sdk == "Neuron SDK 2.32"
    assert spec.assignment == "asst4-trainium2-nki06" and "(NKI 0.6)" in spec.title
    assert (spec.spec_version, spec.thresholds_version) == ("1", "2025-11-13")


def test_the_legacy_spec_stays_the_staff_consoles_default():
    """The console offers the Trainium2 spec whose title sorts last (web/staff/console.py): the
    NKI 0.6 spec's title sorts under the legacy one's, so a new assignment stays legacy unless
    staff choose otherwise."""
    legacy, current = grader.load_spec("asst4-trainium2"), grader.load_spec("asst4-trainium2-nki06")
    assert sorted([current.title, legacy.title])[-1] == legacy.title


def test_the_nki06_spec_is_the_same_assignment_as_the_legacy_one():
    """Same files, tests, points, tiers, gating, configurations, tolerances and thresholds: only
    its name, title, versions and dialect differ, so a kernel migrated line by line earns the
    same grade."""
    legacy, current = grader.load_spec("asst4-trainium2"), grader.load_spec("asst4-trainium2-nki06")
    assert current.tests == legacy.tests and current.files == legacy.files
    assert current.tolerances == legacy.tolerances and current.thresholds() == legacy.thresholds()
    same = ("platform", "partial_credit", "precheck", "implausible_speedup", "time_budget_s", "config_timeout_s")
    assert [getattr(current, k) for k in same] == [getattr(legacy, k) for k in same]
    assert current.test("transpose").compute_only == legacy.test("transpose").compute_only == ("nc_transpose",)
    assert current.dialect != legacy.dialect and current.spec_hash != legacy.spec_hash


def test_the_trn3_spec_is_the_nki06_assignment_with_thresholds_of_its_own():
    """Same files, tests, points, tiers, gating, configurations and tolerances as the Trainium2
    NKI 0.6 spec; its platform and thresholds are Trainium3's, none slower than Trainium2's."""
    trn2, trn3 = grader.load_spec("asst4-trainium2-nki06"), grader.load_spec("asst4-trainium3-nki06")
    assert trn3.platform == "trn3" and trn3.dialect == trn2.dialect and trn3.files == trn2.files
    assert [dataclasses.replace(t, thresholds_us=None) for t in trn3.tests] == \
        [dataclasses.replace(t, thresholds_us=None) for t in trn2.tests]
    for name, tiers in trn3.thresholds().items():
        for tier, us in tiers.items():
            assert 0.7 * trn2.thresholds()[name][tier] < us <= trn2.thresholds()[name][tier], (name, tier)


@pytest.mark.parametrize("value", ["trn4", "inf2", "", 2, ["trn2"]])
def test_an_unknown_platform_says_which_ones_there_are(value):
    data = tomllib.loads((specs.SPEC_DIR / "asst4-trainium2.toml").read_text())
    data["platform"] = value
    with pytest.raises(grader.SpecError) as info:
        specs.parse(data, "course.toml")
    reason = info.value.reason
    assert reason.startswith("course.toml: platform must be one of") and f"got {value!r}" in reason
    assert '"trn1" (Trainium1, NeuronCore-v2)' in reason and '"trn3" (Trainium3, NeuronCore-v4)' in reason


@pytest.mark.parametrize("value", ["nki-0.5", "nki", "neuronxcc.nki", "", 6, ["nki-0.6"]])
def test_an_unknown_dialect_says_which_ones_there_are(value):
    data = tomllib.loads((specs.SPEC_DIR / "asst4-trainium2.toml").read_text())
    data["dialect"] = value
    with pytest.raises(grader.SpecError) as info:
        specs.parse(data, "course.toml")
    reason = info.value.reason
    assert reason.startswith("course.toml: dialect must be one of") and f"got {value!r}" in reason
    assert "'neuronxcc-nki'" in reason and "'nki-0.6'" in reason and "Neuron SDK 2.32" in reason
    assert 'dialect = "nki-0.6"' in info.value.remedy


def test_new_thresholds_keep_the_dialect():
    spec = grader.load_spec("asst4-trainium2-nki06")
    new = grader.spec_with_thresholds(spec, {"perf_224_pool1_float32": {"optimized": 4800, "relaxed": 5000}}, "t9")
    assert new.dialect == CURRENT.name and new.spec_hash != spec.spec_hash
