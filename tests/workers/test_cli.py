"""The service commands as a person runs them: `grader submit` on this machine's service and
its input errors, `grader queue`, and `grader serve` starting everything on the embedded
defaults and stopping everything on Ctrl-C."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from service_processes import die_with_parent
from service_waits import wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "doubles"))

from fixtures import sdk  # noqa: E402,F401
from worker_helpers import OPTIMIZED, ROOT


def _grader(*args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "service.cli", *args], cwd=ROOT, env=env or dict(os.environ),
                          capture_output=True, text=True, timeout=timeout)


def test_submit_follows_the_run_and_prints_the_report(db, assignment, student, celery_worker, tmp_path):
    celery_worker("sim")
    path = tmp_path / "conv2d.py"
    path.write_bytes(OPTIMIZED)
    out = _grader("submit", str(path), "--assignment", "tiny", "--email", student.email,
                  "--json", str(tmp_path / "r.json"))
    assert out.returncode == 0, out.stderr
    assert "queued" in out.stderr and "Total" in out.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["score"]["total"] == 7.5 and report.get("seed") is None

    queue = _grader("queue", "--json")
    assert queue.returncode == 0, queue.stderr
    stats = json.loads(queue.stdout)
    assert stats["workers_alive"] == 1 and stats["queues"]["sim"] == {"queued": 0, "running": 0}


def test_submit_bad_input_exits_2_with_the_reason(db, assignment, student, broker, tmp_path):
    path = tmp_path / "conv2d.py"
    path.write_bytes(b"def fused_conv2d_maxpool(X, W, bias, pool_size:\n")
    out = _grader("submit", str(path), "--assignment", "tiny", "--email", student.email)
    assert out.returncode == 2 and "syntax" in out.stderr.lower()
    missing = _grader("submit", str(path), "--assignment", "nope")
    assert missing.returncode == 2 and "no assignment named 'nope'" in missing.stderr
    no_token = _grader("submit", str(path), "--server", "http://127.0.0.1:9")
    assert no_token.returncode == 2 and "token" in no_token.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_starts_everything_embedded_and_ctrl_c_stops_it():
    import requests
    # not pytest's tmp_path: pytest makes its root 0700 again, which the server's own user must traverse
    tmp_path = Path(tempfile.mkdtemp(prefix="nki-test-serve-"))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(NKI_GRADER_HOME=str(tmp_path / "home"), PYTHONUNBUFFERED="1",
               XDG_CONFIG_HOME=str(tmp_path / "config"))
    port = _free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        serve = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(port)], cwd=ROOT,
                                 env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                 preexec_fn=die_with_parent(signal.SIGINT))
    try:
        def ready():
            if serve.poll() is not None:
                raise AssertionError(f"grader serve exited:\n{log.read_text()[-4000:]}")
            text = log.read_text(errors="replace")
            return "Ctrl-C stops everything" in text and text
        text = wait_for(ready, 300, "grader serve to come up")
        if "is serving at" in text:
            assert f"http://127.0.0.1:{port}" in text and "login" in text.lower()
            assert requests.get(f"http://127.0.0.1:{port}/", timeout=30).status_code < 500
        home = str(Path(env["NKI_GRADER_HOME"]).resolve())
        # the summary comes last, nothing buries it: the parts' output is in <instance>/logs/
        summary = text[text.index("nki-grader is serving at"):]
        assert f"Instance folder: {home}" in summary and f"Logs folder:     {home}/logs" in summary
        assert "First admin sign-in (one-time link): http" in summary
        assert summary.rstrip().endswith("Ctrl-C stops everything (the site, the workers, the embedded databases).")
        logs = Path(home) / "logs"
        assert {p.name for p in logs.iterdir()} == {"serve.log", "worker-sim.log", "worker-nightly.log",
                                                   "worker-staff.log", "beat.log", "web.log", "guardian.log"}
        if os.geteuid() == 0:       # Celery's root warning is replaced by one line of ours
            assert text.count("running as root:") == 1
        assert (Path(home) / "gunicorn.ctl").exists() or "is serving at" not in text   # its own, not ~/.gunicorn
        # another terminal, another folder, no NKI_GRADER_HOME: `grader queue` finds this instance
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        other = {k: v for k, v in env.items() if k != "NKI_GRADER_HOME"}
        queue = subprocess.run([sys.executable, "-m", "workers.cli", "queue", "--json"], cwd=elsewhere, env=other,
                               capture_output=True, text=True, timeout=300)
        assert queue.returncode == 0, queue.stderr
        assert json.loads(queue.stdout)["instance"] == home
        assert f"talking to the instance at {home}" in queue.stderr
        assert list(elsewhere.iterdir()) == []              # no new instance made there
        family = psutil.Process(serve.pid).children(recursive=True)
        pid_file = Path(env["NKI_GRADER_HOME"]) / "pgdata" / "postmaster.pid"
        family.append(psutil.Process(int(pid_file.read_text().split()[0])))      # the embedded PostgreSQL
        assert len(family) >= 4                       # worker, beat, (web), redis, postgres
        serve.send_signal(signal.SIGINT)              # what Ctrl-C sends
        assert serve.wait(180) == 0, log.read_text()[-4000:]
        assert "grader serve: stopped" in log.read_text()
        whole = log.read_text(errors="replace")
        assert "[tasks]" not in whole and "celery beat v" not in whole and " GET / " not in whole   # no banners
        everything = whole + "".join(p.read_text(errors="replace") for p in logs.iterdir())
        assert "SecurityWarning" not in everything and "superuser privileges" not in everything
        assert "Warm shutdown" in (logs / "worker-sim.log").read_text()         # the parts did write there
        gone, alive = psutil.wait_procs(family, timeout=60)
        assert not alive, f"left running: {alive}"
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
        shutil.rmtree(tmp_path, ignore_errors=True)


def test_serve_on_a_taken_port_says_so_before_anything_else(tmp_path):
    """Another program holds the port: `grader serve` starts nothing, prints no URL or admin link
    (they would be the other program's), names the port and how to choose another."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(NKI_GRADER_HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "service.cli", "serve", "--port", str(port)], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert f"port {port} on 127.0.0.1 is in use by another program" in out.stderr and "--port" in out.stderr
    assert "serving at" not in out.stdout + out.stderr and "sign-in" not in out.stdout + out.stderr
    assert not (tmp_path / "home").exists()                        # nothing started, nothing made


def test_client_commands_refuse_to_invent_an_instance(tmp_path):
    """`grader queue` / `submit` / `nightly` in an empty folder with no service: a refusal that says
    where it looked and how to point at a service, and no database made as a side effect."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "NKI_GRADER_HOME")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "conv2d.py").write_bytes(OPTIMIZED)
    for argv in (["queue"], ["submit", "conv2d.py"], ["nightly"]):
        out = subprocess.run([sys.executable, "-m", "workers.cli", *argv], cwd=empty, env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, (argv, out.stdout, out.stderr)
        assert "no nki-grader service found" in out.stderr and "grader serve" in out.stderr
        assert "NKI_GRADER_HOME" in out.stderr
        assert sorted(p.name for p in empty.iterdir()) == ["conv2d.py"]
    # a NKI_GRADER_HOME naming a folder without a service is said to be that, not searched past
    out = subprocess.run([sys.executable, "-m", "workers.cli", "queue"], cwd=empty, timeout=120,
                         env={**env, "NKI_GRADER_HOME": str(tmp_path / "nothing")}, capture_output=True, text=True)
    assert out.returncode == 2 and "holds no nki-grader database" in out.stderr
    assert not (tmp_path / "nothing").exists()


def test_instance_lookup_order(tmp_path, monkeypatch):
    from store.instance import NoInstanceError, find_existing, remember
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("NKI_GRADER_HOME", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)

    def instance(name):
        folder = tmp_path / name
        (folder / "pgdata").mkdir(parents=True)
        (folder / "pgdata" / "PG_VERSION").write_text("18\n")
        return folder.resolve()

    with pytest.raises(NoInstanceError):
        find_existing()
    local = instance("instance")
    assert find_existing().folder == local                         # ./instance
    served = instance("served")
    remember(served)
    assert find_existing().folder == served                        # the last `grader serve` beats ./instance
    explicit = instance("explicit")
    monkeypatch.setenv("NKI_GRADER_HOME", str(explicit))
    assert find_existing().folder == explicit                      # NKI_GRADER_HOME beats both
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:secret@db.example:5432/g")
    found = find_existing()
    assert found.folder is None and "secret" not in found.describe() and "db.example" in found.describe()


def test_trn2_worker_refuses_cores_it_cannot_pin(sdk, capsys):
    """(A machine without Neuron devices, SDK, tools or interpreter: tests/grader/test_neuron_lines.py.)"""
    import sdk_envs
    from workers.cli import main
    for cores, why in (("0,0", "each NeuronCore once"), ("7,8", "this instance has NeuronCores 0-7")):
        done = subprocess.run([str(sdk.legacy), "-m", "workers.cli", "worker", "--queue", "trn2", "--cores", cores],
                              capture_output=True, text=True, env=sdk_envs.run_env(sdk.settings("legacy", cores=8)),
                              timeout=120)
        assert done.returncode == 2 and why in done.stderr, done.stderr
    assert main(["worker", "--queue", "sim", "--concurrency", "0"]) == 2
    assert "--concurrency must be at least 1" in capsys.readouterr().err


def test_a_worker_says_in_our_words_why_root_is_fine_instead_of_celerys_warning(celery_worker):
    """Celery warns at length, on every start, that root is "absolutely not recommended"; the
    sandbox needs root to confine kernels, so a worker says why once, and Celery's text is gone."""
    worker = celery_worker("sim")
    said = worker.output()
    assert "SecurityWarning" not in said and "superuser privileges" not in said
    if os.geteuid() == 0:
        assert said.count("grader: running as root: that lets the sandbox confine each graded kernel") == 1
    else:
        assert "running as root" not in said


def test_submit_says_a_final_status_in_words():
    """`grader submit` printed 'infra_error' when our grader gave up on a run."""
    from workers.submit_cmd import _waiting_line, said
    assert _waiting_line("infra_error", None, None) == "grader error" and said("cancelled") == "cancelled"
    assert said("paused") == "paused"            # a status a newer server may send: said as it came
