"""A redis-server that speaks only TLS (a self-signed CA made with ``openssl``) and
whose default user is off: an admin user, and ``rc`` limited by the ACL line of
docs/operations.md.  Imported by name (``tests/helpers`` is on ``sys.path``)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import redis
from procs import stop
from redis_binary import redis_server_path

from redcron.embedded import free_port

#: the password of the limited user (searched for in logs and error messages)
RC_PASSWORD = "s3cr3t-Pw-4-rc"
ADMIN_PASSWORD = "admin-Pw-77"
#: docs/operations.md, "TLS and ACL": the limited user's rules
RC_RULES = ["on", f">{RC_PASSWORD}", "~rc:*", "resetchannels", "+@all", "-@dangerous"]


def make_certs(d: Path) -> tuple[Path, Path, Path]:
    """A CA, and a server certificate it signed for 127.0.0.1: (ca, cert, key)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise FileNotFoundError("openssl")
    d.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=d, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", "1", "-subj", "/CN=redcron test CA")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=127.0.0.1")  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.crt", "-days", "1", "-extfile", "san.ext")  # fmt: skip
    return d / "ca.crt", d / "server.crt", d / "server.key"


class TlsRedis:
    """The server (TLS port only), started and stopped by the test."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ca, cert, key = make_certs(root / "certs")
        self.port = free_port()
        binary = redis_server_path()
        self.args = [
            binary, "--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1",
            "--tls-cert-file", str(cert), "--tls-key-file", str(key),
            "--tls-ca-cert-file", str(self.ca), "--tls-auth-clients", "no",
            "--dir", str(root), "--save", "", "--appendonly", "no",
            "--maxmemory-policy", "noeviction", "--logfile", str(root / "redis.log"),
            "--user", "default", "off",
            "--user", "admin", "on", f">{ADMIN_PASSWORD}", "~*", "&*", "+@all",
            "--user", "rc", *RC_RULES,
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, user: str = "rc", password: str = RC_PASSWORD) -> str:
        return (
            f"rediss://{user}:{password}@127.0.0.1:{self.port}/0"
            f"?ssl_ca_certs={self.ca}&ssl_cert_reqs=required"
        )

    def admin(self) -> redis.Redis:
        return redis.Redis.from_url(self.url("admin", ADMIN_PASSWORD), socket_timeout=5)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while True:
            client = self.admin()
            try:
                client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise
                time.sleep(0.05)
            finally:
                client.close()

    def stop(self) -> None:
        stop(self.proc)
        self.proc = None
