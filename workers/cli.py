"""The workers' commands of the `grader` console script, composed with the grading core's by
service/cli.py (grader/ imports nothing of ours; `grader serve` is service/serve.py's):

    grader worker --queue sim|trn2|nightly|staff   a Celery worker (trn2: one grade per NeuronCore)
    grader beat                           the nightly schedule and the reaper of dead workers' runs
    grader nightly [--now]                the reference regression (now, here; or queued)
    grader submit PATH [--server URL --token T]   enqueue, follow the progress, print the report
    grader queue                          depth per queue, running, workers alive
    grader migrate                        bring the database to the current schema (Alembic)
    grader backup DEST / restore SRC      one file with the database and secret key / back into an instance

`python -m workers.cli ...` runs these commands without the console script."""
from __future__ import annotations

import argparse
import os
import sys

from grader.vocabulary import PLATFORM_OF_QUEUE, Queue, RunStatus, TestStatus, Tier, values


def _fail(message: str) -> int:
    print(f"grader: {message}", file=sys.stderr)
    return 2


def talk_to_existing_instance():
    """For commands that only talk to a running service: find it (never make a new one), say which.
    Returns the instance, or None after printing why there is none."""
    from store.instance import NoInstanceError, not_served_reason, use_existing
    try:
        found = use_existing()
    except NoInstanceError as err:
        print(f"grader: {err}", file=sys.stderr)
        return None
    dead = not_served_reason(found)       # before any connection: its database may outlive its serve
    if dead:
        print(f"grader: {dead}", file=sys.stderr)
        return None
    print(f"grader: talking to {found.describe()}", file=sys.stderr)
    return found


def _migrate_if_embedded() -> None:
    """On the embedded database this process is the only one to ask, so it brings the schema up
    to date itself; a deployment (DATABASE_URL) runs `grader migrate` once instead."""
    if not os.environ.get("DATABASE_URL"):
        from store import upgrade
        upgrade()


def root_note() -> str:
    """Why a worker may run as root, in our words (Celery's own warning says only "not recommended")."""
    from grader.sandbox import capabilities
    if capabilities().unprivileged:
        kernels = "and each student kernel runs as a uid of its own, never as root"
    else:
        kernels = ("but this machine cannot give kernels a uid of their own, so they run as root inside "
                   "the sandbox (docs/security.md)")
    return ("running as root: that lets the sandbox confine each graded kernel (namespaces, cgroups), "
            f"{kernels}. To run as an ordinary user instead, start it as that user; the sandbox then "
            "has only what user namespaces allow.")


def _drop_celerys_root_warning() -> None:
    """Celery warns about root on every start of every worker; root_note() says it once instead."""
    import warnings
    from celery.exceptions import SecurityWarning
    warnings.filterwarnings("ignore", message="You're running the worker with superuser privileges",
                            category=SecurityWarning)


# --------------------------------------------------------------------------- worker

def register_worker(sub) -> None:
    p = sub.add_parser("worker", help="run a grading worker (Celery) on the sim, trn2, nightly or staff queue")
    p.add_argument("--queue", choices=values(Queue), default=Queue.SIM.value,
                   help="sim: student grades on the simulator; trn2: on Trainium; nightly: the reference "
                        "regression, apart so student grades never wait behind it; staff: rescores, "
                        "regrades and exports TAs start")
    p.add_argument("--concurrency", type=int, help="grades at once (sim: default one per CPU core, as memory allows; trn2: one per NeuronCore)")
    p.add_argument("--cores", help="trn2: NeuronCores to use, e.g. 0,1,2,3 (default $NKI_NEURON_CORES, else "
                                   "every NeuronCore of the instance)")
    p.add_argument("--name", help="worker name; %%h is the host name (default grader-<queue>-<pid>@%%h)")
    p.add_argument("--time-budget", type=float, help="wall seconds for one grade (default: the spec's)")
    p.add_argument("--loglevel", default="INFO",
                   help="Celery's log level: DEBUG, INFO, WARNING or ERROR (default INFO)")
    p.add_argument("--quiet", action="store_true", help="no start-up banner (grader serve's own workers)")
    p.add_argument("--instance", help="the instance folder (default $NKI_GRADER_HOME, else ./instance); "
                                      "`grader serve` names its own, so `pgrep -f FOLDER` finds its processes")
    p.set_defaults(func=_worker)


def _use_instance(args) -> None:
    if args.instance:
        os.environ["NKI_GRADER_HOME"] = args.instance


def _broker_problem() -> str:
    """Why the broker cannot be had ('' when it can): said here, before Celery, whose start-up
    signal would log it and fall back to a broker that is not ours."""
    from .broker import broker_url
    try:
        broker_url()
    except RuntimeError as err:
        return str(err)
    return ""


def _worker(args) -> int:
    import socket
    _use_instance(args)
    if args.concurrency is not None and args.concurrency < 1:
        return _fail("--concurrency must be at least 1")
    if args.time_budget is not None and args.time_budget <= 0:
        return _fail("--time-budget must be a positive number of seconds")
    name = (args.name or f"grader-{args.queue}-{os.getpid()}@%h").replace("%h", socket.gethostname())
    from .answers import made_ahead
    from .capacity import sim_grades_at_once, threads_per_grade
    concurrency = args.concurrency or (sim_grades_at_once(made_ahead()) if args.queue == Queue.SIM else 1)
    if args.queue == Queue.TRN2:
        from grader.neuron import NeuronUnavailable, detect
        try:
            setup = detect()        # device, SDK line, its tools and interpreter: at start, not per grade
        except NeuronUnavailable as err:
            return _fail(f"this machine cannot run a trn2 worker: {err}")
        if setup.platform != PLATFORM_OF_QUEUE[Queue.TRN2]:
            # the queue's grades are timed against thresholds set on Trainium2: another chip's
            # latencies would be scored against them
            return _fail(f"this machine cannot run a trn2 worker: it is {setup.generation()}, and the trn2 "
                         "queue grades on Trainium2 (its assignments' thresholds were measured there)")
        # the cores the runtime lets this worker use (nrt_get_visible_vnc_count, NEURON_RT_VISIBLE_CORES)
        raw = args.cores or os.environ.get("NKI_NEURON_CORES") or ",".join(map(str, setup.visible))
        try:
            cores = [int(c) for c in raw.split(",") if c.strip()]
        except ValueError:
            return _fail(f"--cores {raw!r}: give NeuronCore numbers separated by commas, e.g. 0,1,2,3")
        if not cores or len(set(cores)) != len(cores):
            return _fail(f"--cores {raw!r}: give each NeuronCore once, e.g. 0,1,2,3")
        if not all(c in setup.visible for c in cores):
            seen = os.environ.get("NEURON_RT_VISIBLE_CORES")
            return _fail(f"--cores {raw!r}: this instance has NeuronCores " + (
                f"{seen} visible to this worker (NEURON_RT_VISIBLE_CORES)" if seen else f"0-{setup.cores - 1}"))
        print(f"grader: trn2 worker on the {setup.line} SDK line ({setup.sdk}), NeuronCores "
              f"{','.join(map(str, cores))}: one grade per core", file=sys.stderr)
        # one pool process per core: timed runs never share a NeuronCore
        concurrency = len(cores)
        os.environ["NKI_NEURON_CORES"] = ",".join(map(str, cores))
    else:
        os.environ.pop("NKI_NEURON_CORES", None)
    _migrate_if_embedded()
    problem = _broker_problem()
    if problem:
        return _fail(problem)
    os.environ.setdefault("NKI_GRADE_THREADS", str(threads_per_grade(concurrency)))
    os.environ["NKI_WORKER_NAME"] = name
    os.environ["NKI_WORKER_QUEUES"] = args.queue
    if args.time_budget:
        os.environ["NKI_GRADE_BUDGET_S"] = str(args.time_budget)
    from .app import app
    import workers.tasks  # noqa: F401  (registers tasks and signal handlers)
    _drop_celerys_root_warning()
    if os.geteuid() == 0 and not args.quiet:
        print(f"grader: {root_note()}", file=sys.stderr)
    app.worker_main((["--quiet"] if args.quiet else []) + ["worker", "--queues", args.queue, "--hostname", name, "--concurrency", str(concurrency),
                     "--pool", "prefork", "--loglevel", args.loglevel, "--without-gossip", "--without-mingle"])
    return 0


# --------------------------------------------------------------------------- beat

def register_beat(sub) -> None:
    p = sub.add_parser("beat", help="run the scheduler: nightly regression and the reaper of stalled runs")
    p.add_argument("--schedule", help="beat's schedule file (default <instance>/celerybeat-schedule)")
    p.add_argument("--loglevel", default="INFO",
                   help="Celery's log level: DEBUG, INFO, WARNING or ERROR (default INFO)")
    p.add_argument("--quiet", action="store_true", help="no start-up banner (grader serve's own beat)")
    p.add_argument("--instance", help="the instance folder (default $NKI_GRADER_HOME, else ./instance); "
                                      "`grader serve` names its own, so `pgrep -f FOLDER` finds its processes")
    p.set_defaults(func=_beat)


def _beat(args) -> int:
    _use_instance(args)
    from store.db import instance_dir
    from .app import app
    from .reaper import Reaper
    import workers.tasks  # noqa: F401
    _migrate_if_embedded()
    problem = _broker_problem()
    if problem:
        return _fail(problem)
    reaper = Reaper()
    reaper.start()
    schedule = args.schedule or str(instance_dir() / "celerybeat-schedule")
    try:
        app.start((["--quiet"] if args.quiet else []) + ["beat", "--schedule", schedule, "--loglevel", args.loglevel])
    finally:
        reaper.stop()
    return 0


# --------------------------------------------------------------------------- nightly

def register_nightly(sub) -> None:
    p = sub.add_parser("nightly", help="the reference-kernel regression")
    p.add_argument("--now", action="store_true", help="run it here and now and print the results "
                                                     "(without: queue it for the nightly worker)")
    p.set_defaults(func=_nightly)


def _nightly(args) -> int:
    from sqlalchemy import select
    if talk_to_existing_instance() is None:
        return 2
    from store import session_scope, upgrade
    from store.models import NightlyResult
    upgrade()
    if not args.now:
        from .tasks import nightly_regression
        nightly_regression.apply_async(queue=Queue.NIGHTLY.value)
        print("nightly regression queued for the nightly worker (`grader serve` runs one; elsewhere "
              "`grader worker --queue nightly`); student grades do not wait behind it")
        return 0
    import grader
    from grader import render
    from grader.report_view import threshold_us
    from .nightly import run_nightly

    def progress(reference, event) -> None:          # ~12 minutes of work: say each test as it ends
        print(f"  {reference}: {render.format_test_line(event.done, event.total, render.test_summary(event.result))}",
              flush=True)
    print("nightly regression: grading each reference kernel under each active spec", flush=True)
    night_id = run_nightly(trigger="manual", progress=progress)
    with session_scope() as s:
        rows = s.scalars(select(NightlyResult).where(NightlyResult.nightly_run_id == night_id)
                         .order_by(NightlyResult.id)).all()
        print(f"nightly run {night_id}: {len(rows)} reference grades")
        for r in rows:
            mark = "DRIFT " if r.drift else ""
            print(f"  {mark}{r.spec_name} {r.reference_kernel} on {r.backend}: "
                  f"{TestStatus.PASSED if r.passed else 'FAILED'}, score {r.score_total:g}")
            view = grader.view_of(grader.Report.from_json(r.report)) if r.report else None
            for test, us in sorted(r.p99_us.items()):
                force = r.thresholds_in_force.get(test, {})
                title = view.test(test).title if view and view.test(test) else test
                print(f"      {render.escape_control(title)}: p99 {us:.1f} us, implies {r.implied_thresholds[test]:.1f} us; "
                      f"in force: optimized {threshold_us(force.get(Tier.OPTIMIZED))} / "
                      f"relaxed {threshold_us(force.get(Tier.RELAXED))}")
            if r.drift_reason:
                print(f"      drift: {r.drift_reason}")
            for test, why in sorted((r.not_proposed or {}).items()):
                title = view.test(test).title if view and view.test(test) else test
                print(f"      {render.escape_control(title)}: {why}")
    return 0


# --------------------------------------------------------------------------- queue

def register_queue(sub) -> None:
    p = sub.add_parser("queue", help="queue depth, running grades and workers alive")
    p.add_argument("--json", action="store_true", help="print the numbers as JSON (for scripts)")
    p.set_defaults(func=_queue)


def _queue(args) -> int:
    import json
    found = talk_to_existing_instance()
    if found is None:
        return 2
    from store import session_scope, upgrade
    from .enqueue import queue_stats, since
    upgrade()
    with session_scope() as s:
        stats = queue_stats(s)
    if args.json:
        print(json.dumps({**stats, "instance": str(found.folder) if found.folder else "DATABASE_URL"}, indent=2))
        return 0
    for queue, c in stats["queues"].items():
        print(f"{queue:5s} queued {c[RunStatus.QUEUED]:5d}  running {c[RunStatus.RUNNING]:4d}")
    print(f"workers alive: {stats['workers_alive']}")
    for w in stats["workers"]:
        print(f"  {w['name']}  queues {w['queues']}  pid {w['pid']}  last heartbeat {since(w['seen_at'])}")
    print(f"running now: {len(stats['running']) or 'nothing'}")
    for d in stats["running"]:
        print(f"  {d['what']} on {d['queue']}, since {since(d['since'])}: {d['detail']}")
    return 0


# --------------------------------------------------------------------------- migrate

def register_migrate(sub) -> None:
    p = sub.add_parser("migrate", help="bring the database (DATABASE_URL or the embedded one) to the current schema")
    p.set_defaults(func=_migrate)


def _migrate(args) -> int:
    """Migrates an instance that exists (never makes one: a new instance is `grader serve`'s or a
    restore's), one no serve is serving (serve migrates its own at every start)."""
    from store import upgrade
    from store.backup import instance_database
    from store.db import engine_from_env
    from store.instance import InstanceBusy, NoInstanceError, find_existing, was_served
    try:
        found = find_existing()
    except NoInstanceError as err:
        return _fail(f"nothing to migrate: {err}")
    from store.backup import schema_revision
    print(f"grader: migrating {found.describe()}", file=sys.stderr)
    revisions = []              # before and after: the operator sees whether anything was done

    def migrate(engine) -> None:
        revisions.append(schema_revision(engine))
        upgrade(engine)
        revisions.append(schema_revision(engine))
    if found.folder is None:
        migrate(engine_from_env())
    else:
        try:
            with instance_database(found.folder, "migrating", while_served=False, lock=was_served(found.folder),
                                   say=lambda text: print(text, file=sys.stderr)) as pg:
                migrate(engine_from_env(pg.url))
        except InstanceBusy as err:
            if err.served:
                return _fail(f"`grader serve` (pid {err.holder.pid}) is serving {found.folder}, and serve brings the "
                             f"schema up to date itself at every start: stop it, then start it again (or run "
                             f"`grader migrate` while it is stopped)")
            return _fail(str(err))
    before, after = revisions
    print(f"database schema is current: {after} " + ("(it was already)" if before == after else
          f"(migrated from {before})" if before else "(made: the database was empty)"))
    return 0


# --------------------------------------------------------------------------- backup / restore

def register_backup(sub) -> None:
    p = sub.add_parser("backup", help="write a backup of the instance (its database and secret key) to one file")
    p.add_argument("dest", help="the backup file to write (it must not exist), or a folder to write "
                                "nki-grader-YYYYmmdd-HHMMSS.tar into")
    p.set_defaults(func=_backup)


def _backup(args) -> int:
    from store.backup import BackupError, backup, rows
    from store.instance import InstanceBusy, NoInstanceError
    if args.dest.endswith(os.sep) and not os.path.isdir(args.dest):
        return _fail(f"no backup written: {args.dest} is not a folder; make it first (mkdir -p {args.dest})")
    try:
        dest, manifest = backup(args.dest, say=lambda text: print(f"grader: {text}", file=sys.stderr))
    except (BackupError, NoInstanceError, InstanceBusy) as err:
        return _fail(f"no backup written: {err}")
    key = {"included": "and its secret key", "environment": "but not the secret key (it is NKI_GRADER_SECRET_KEY: "
           "keep that with the backups, e.g. your .env)", "none": "(no secret key in the instance folder)"}[manifest.secret_key]
    held = "password hashes and the key" if manifest.secret_key == "included" else "password hashes"
    # a deployment's backup goes back into a database; an embedded instance's into a new folder
    how = (f"`grader restore {dest}` with DATABASE_URL naming an empty database" if os.environ.get("DATABASE_URL")
           else f"`grader restore {dest} --instance NEW_FOLDER`")
    print(f"backup written: {dest} ({os.path.getsize(dest) / 1e6:.1f} MB): the database, schema "
          f"{manifest.schema_revision}, {rows(manifest.counts)}, {key}. It holds {held}: keep it as safe as "
          f"the instance. Restore with {how}")
    return 0


def register_restore(sub) -> None:
    p = sub.add_parser("restore", help="bring an instance back from a `grader backup` file, into a new instance folder")
    p.add_argument("src", help="the backup file `grader backup` wrote")
    p.add_argument("--instance", help="the instance folder to restore into (default $NKI_GRADER_HOME, else "
                                      "./instance; with DATABASE_URL set and no --instance, that database)")
    p.add_argument("--force", action="store_true",
                   help="replace the data of an instance that already has some (never one being served)")
    p.set_defaults(func=_restore)


def _restore(args) -> int:
    from pathlib import Path
    from store.backup import BackupError, restore, rows
    try:
        done = restore(Path(args.src), Path(args.instance) if args.instance else None, force=args.force,
                       say=lambda text: print(text, file=sys.stderr))
    except BackupError as err:
        return _fail(f"nothing restored: {err}")
    print(f"restored {args.src} ({done.manifest.describe()}) into {done.target}"
          f"{', replacing its data' if done.replaced else ''}: {rows(done.counts)}.")
    if done.requeued:
        many = len(done.requeued) > 1
        print(f"  run{'s' if many else ''} {', '.join(map(str, done.requeued))} {'were' if many else 'was'} being "
              f"graded when the backup was made: queued again, graded once a worker takes "
              f"{'them' if many else 'it'}")
    if done.folder is not None:
        print(f"  Start it with: NKI_GRADER_HOME={done.folder} grader serve")
    return 0


# --------------------------------------------------------------------------- submit / serve

def register_submit(sub) -> None:
    p = sub.add_parser("submit", help="submit for grading by the service, follow it, print the report")
    p.add_argument("path", help="the submission: conv2d.py, kernels.py or an archive")
    p.add_argument("--assignment", default="asst4-trainium2", help="assignment name on the server")
    p.add_argument("--server", help="the site's URL (uses its JSON API); without it: this machine's service")
    p.add_argument("--token", default=os.environ.get("NKI_GRADER_TOKEN"),
                   help="API token for --server (default $NKI_GRADER_TOKEN)")
    p.add_argument("--email", default="local@localhost", help="without --server: the local user to submit as")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds to follow the run before giving up")
    p.add_argument("--json", help="also write the report JSON here")
    p.set_defaults(func=_submit)


def _submit(args) -> int:
    if not args.server and talk_to_existing_instance() is None:
        return 2
    from .submit_cmd import submit_command
    return submit_command(args)


COMMANDS = (register_worker, register_beat, register_nightly, register_submit, register_queue,
            register_migrate, register_backup, register_restore)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.cli", description="nki-grader service commands")
    sub = parser.add_subparsers(dest="command", required=True)
    for register in COMMANDS:
        register(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
