"""docker-compose.yml (Docker is not on our machines): its structure is what deployment needs,
and every command a service of our image runs resolves to a real entry point with valid flags."""
from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import re
import shutil
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
OURS = {name for name, svc in SERVICES.items() if "build" in svc}


def _expand(value: str) -> str:
    """Compose's ${VAR:-default} with the defaults, as an unset environment gives them."""
    return re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", value)


def test_every_part_of_the_service_is_there():
    assert set(SERVICES) == {"postgres", "redis", "migrate", "web", "worker-sim", "worker-nightly", "worker-staff",
                             "worker-trn2", "beat"}
    assert OURS == {"migrate", "web", "worker-sim", "worker-nightly", "worker-staff", "worker-trn2", "beat"}
    assert {"pgdata", "redisdata", "grader-data"} <= set(COMPOSE["volumes"])
    assert (ROOT / "Dockerfile").is_file()


def test_health_checks_volumes_and_ordering():
    for name, svc in SERVICES.items():
        health = svc.get("healthcheck", {})
        if name == "migrate":                       # a one-shot job: others wait for it to complete
            assert health.get("disable") is True
            continue
        assert health.get("test"), f"{name} has no health check"
    assert SERVICES["redis"]["command"][:1] == ["redis-server"] and "--appendonly" in SERVICES["redis"]["command"]
    for name in OURS - {"migrate"}:
        deps = SERVICES[name]["depends_on"]
        assert deps["postgres"]["condition"] == "service_healthy"
        assert deps["redis"]["condition"] == "service_healthy"
        assert deps["migrate"]["condition"] == "service_completed_successfully"
        assert any(v.endswith(":/data") for v in SERVICES[name]["volumes"])
        env = SERVICES[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgresql://") and "@postgres:5432/" in env["DATABASE_URL"]
        assert env["REDIS_URL"].startswith("redis://redis:6379")


def test_every_container_of_ours_stops_whole():
    """Docker's init as PID 1 (signals passed on, orphans reaped), and time for a warm shutdown:
    a grade is finished or re-queued, never left half-done by a SIGKILL that came too soon."""
    for name in OURS:
        assert SERVICES[name].get("init") is True, name
        grace = SERVICES[name].get("stop_grace_period", "10s")
        assert grace.endswith("s") and int(grace[:-1]) >= 30, name


def test_the_containers_that_grade_kernels_may_sandbox_them_and_the_site_runs_none():
    """The sandbox confines each kernel with namespaces and cgroups (SYS_ADMIN in the container):
    the sim and nightly workers grade, and so does the staff worker (a problem folder's check
    grades its solutions and starters); the site never runs a kernel or course code."""
    for name in ("worker-sim", "worker-nightly", "worker-staff"):
        assert "SYS_ADMIN" in SERVICES[name].get("cap_add", []), name
        assert "seccomp:unconfined" in SERVICES[name].get("security_opt", []), name
    assert not SERVICES["web"].get("cap_add")


def test_trn2_worker_gets_neuron_devices_tools_and_one_core_each():
    trn2 = SERVICES["worker-trn2"]
    assert trn2["profiles"] == ["trn2"]
    assert any(d.startswith("/dev/neuron") for d in trn2["devices"])
    command = [_expand(c) for c in trn2["command"]]
    assert command[command.index("--queue") + 1] == "trn2" and "--cores" in command
    # where the SDK line's runtime, tools and nrtpy interpreter are (grader/neuron/lines.py)
    env = {k: _expand(str(v)) for k, v in trn2["environment"].items()}
    assert env["GRADER_LIBNRT"] == "/opt/aws/neuron/lib/libnrt.so.1"
    assert env["GRADER_NEURON_TOOLS"] == "/opt/aws/neuron/bin"
    assert "GRADER_NRTPY_PYTHON" in env
    # the image can carry the current line's separate nrtpy venv
    assert "NRTPY_VENV" in trn2["build"]["args"]
    assert "ARG NRTPY_VENV" in (ROOT / "Dockerfile").read_text()


def _grader_parser() -> argparse.ArgumentParser:
    """The `grader` parser as service/cli.py composes it: grader's own `grade` plus every service command."""
    from service.cli import COMMANDS
    parser = argparse.ArgumentParser(prog="grader", exit_on_error=False)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("grade")
    for register in COMMANDS:
        register(sub)
    return parser


@pytest.mark.parametrize("service", sorted(OURS))
def test_command_resolves_to_our_entry_points(service):
    command = [_expand(c) for c in SERVICES[service]["command"]]
    program = command[0]
    scripts = {e.name: e.value for e in importlib.metadata.entry_points(group="console_scripts")}
    assert program in scripts, f"{service}: {program!r} is not a console script installed with the project"
    if program == "grader":
        assert scripts["grader"] == "service.cli:main"
        args = _grader_parser().parse_args(command[1:])         # unknown commands or flags raise
        assert callable(args.func)
    elif program == "gunicorn":
        module, _, call = command[-1].partition(":")
        factory = getattr(importlib.import_module(module), call.removesuffix("()"))
        assert callable(factory)
    else:
        pytest.fail(f"{service}: no rule to check {program!r}")


def test_worker_health_check_pings_its_own_worker_name():
    for name in ("worker-sim", "worker-nightly", "worker-staff", "worker-trn2"):
        svc = SERVICES[name]
        check = svc["healthcheck"]["test"][1]
        assert check.startswith("celery -A workers.app inspect ping")
        queue = svc["environment"]["NKI_QUEUE"]
        command = svc["command"]
        assert command[command.index("--name") + 1] == f"{queue}@%h"
    assert importlib.import_module("workers.app").app.main == "nki_grader"
    assert shutil.which("celery", path=str(Path(sys.executable).parent))


def test_grading_and_nightly_workers_share_a_pool_of_two_answer_sets():
    """The workers that grade and the nightly job that tops the pool up see the same sets:
    two per assignment, under the shared /data (NKI_GRADER_HOME), so in no job directory."""
    for name in ("worker-sim", "worker-trn2", "worker-nightly"):
        env = {k: _expand(str(v)) for k, v in SERVICES[name]["environment"].items()}
        assert env["NKI_ANSWER_POOL_SIZE"] == "2" and env["NKI_GRADER_HOME"] == "/data", name
        assert "NKI_ANSWER_POOL_DIR" not in env          # the default: /data/answer-pool
        assert int(env["NKI_ANSWER_POOL_USES"]) >= 1 and float(env["NKI_ANSWER_POOL_MAX_AGE_S"]) > 0


def test_the_image_holds_every_package_the_project_installs():
    """The Dockerfile copies each package pyproject.toml installs before `pip install .`: an image
    without one (service/, which holds the `grader` console script) starts no service at all."""
    from grader.spec import read_toml
    project = read_toml((ROOT / "pyproject.toml").read_text(), "pyproject.toml")
    packages = {name.rstrip("*") for name in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    packages |= {script.split(":")[0].split(".")[0] for script in project["project"]["scripts"].values()}
    copied = {m.group(1) for m in re.finditer(r"^COPY (\S+) \1$", (ROOT / "Dockerfile").read_text(), re.M)}
    assert packages <= copied, f"the Dockerfile copies no {sorted(packages - copied)}: add `COPY NAME NAME` lines"


def test_every_setting_in_dot_env_reaches_our_containers():
    """docs/operators.md's Settings are read from `.env`: Compose passes a .env variable into a
    container only when the file names it, so each container of ours takes the whole .env, and the
    variables the compose file sets itself (the databases, /data) stay its own."""
    for name in OURS:
        files = SERVICES[name].get("env_file")
        assert files and any(f == ".env" or (isinstance(f, dict) and f["path"] == ".env") for f in files), name
        env = SERVICES[name]["environment"]
        assert {"DATABASE_URL", "REDIS_URL", "NKI_GRADER_HOME", "NKI_GRADER_SECRET_KEY"} <= set(env), name
