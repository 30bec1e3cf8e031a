"""Builds, for a test session, what a Trn2 worker has on each SDK line, from the doubles:

- `legacy`: a Python environment with the grader and `neuronxcc.nki` (SDK 2.26);
- `current`: a Python environment with the grader and the `nki` 0.6 wheel (SDK 2.32);
- `nrtpy`: the separate nrtpy interpreter's environment (nrtpy and NumPy, never nki);
- `lib/libnrt.so.1` (built with the system C compiler) and `bin/neuron-profile`.

Each environment is a real venv whose site-packages reach this project's (for NumPy, nkisim
and the grader) and one doubles folder; `settings(line)` is the environment a worker runs with.
"""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SITE = sysconfig.get_paths()["purelib"]


@dataclass
class SdkEnvs:
    root: Path
    legacy: Path          # python of each environment
    current: Path
    nrtpy: Path
    libnrt: Path
    tools: Path

    def settings(self, line: str, cores: int = 8) -> dict[str, str]:
        env = {"GRADER_LIBNRT": str(self.libnrt), "GRADER_NEURON_TOOLS": str(self.tools),
               "NRT_DOUBLE_CORES": str(cores)}
        if line == "current":
            env["GRADER_NRTPY_PYTHON"] = str(self.nrtpy)
        return env

    def python(self, line: str) -> Path:
        return self.legacy if line == "legacy" else self.current


def _env(root: Path, name: str, folder: Path) -> Path:
    where = root / name
    venv.EnvBuilder(with_pip=False, symlinks=True).create(where)
    purelib = Path(sysconfig.get_paths(vars={"base": str(where), "platbase": str(where)})["purelib"])
    # this project's site-packages processed as a site dir (its editable-install hooks too)
    (purelib / "zz_doubles.pth").write_text(f"import site; site.addsitedir({SITE!r})\n{folder}\n")
    return where / "bin" / "python"


def _libnrt(root: Path) -> Path:
    out = root / "lib" / "libnrt.so.1"
    out.parent.mkdir(parents=True)
    include = sysconfig.get_paths()["include"]
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", f"-I{include}",
                    f'-DLIBNRT_DEVICE_DIR="{HERE / "libnrt"}"', str(HERE / "libnrt" / "fake_libnrt.c"),
                    "-o", str(out)], check=True, capture_output=True)
    return out


def _tools(root: Path) -> Path:
    bin_dir = root / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "neuron-profile"
    tool.write_text(f"#!{sys.executable} -I\nimport sys\nsys.path.insert(0, {str(HERE)!r})\n"
                    "import neuron_profile_double\nsys.exit(neuron_profile_double.main(sys.argv[1:]))\n")
    tool.chmod(0o755)
    return bin_dir


def build(root: Path) -> SdkEnvs:
    root.mkdir(parents=True, exist_ok=True)
    return SdkEnvs(root=root, legacy=_env(root, "legacy", HERE / "sdk_legacy"),
                   current=_env(root, "current", HERE / "sdk_current"),
                   nrtpy=_env(root, "nrtpy", HERE / "nrtpy_site"), libnrt=_libnrt(root), tools=_tools(root))


def run_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRADER_", "NRT_DOUBLE", "NEURON_RT"))}
    env.update(extra)
    return env
