"""TLS served by ``serve`` and ``run`` themselves (``--tls-cert``/``--tls-key``, or ``[receiver]
tls_cert``/``tls_key``), through real sockets with a certificate made here for 127.0.0.1 and
localhost; the files refused in one line (exit 2) before the port is bound; and the one warning
line when the receiver is served on anything but loopback without TLS."""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import json
import os
import socket
import ssl
import subprocess
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from flowledger.receiver.server import CannotListen, listen, loopback
from flowledger.services.ledger import Ledger
from tests.support.builders import dispatch_body
from tests.support.ledgers import new_ledger
from tests.support.processes import FLOWLEDGER, TIMEOUT, env_for, spawn
from tests.support.receiver import (
    auth,
    free_port,
    make_token,
    patient_config_file,
    serve_process,
    stop,
    wait_until_serving,
)

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
WARNING = "without TLS: API tokens would cross the network in clear text"


@dataclasses.dataclass(frozen=True)
class Files:
    cert: Path
    key: Path
    other_key: Path  # a key of no certificate here
    encrypted_key: Path  # ``key``, encrypted with a password
    weak_cert: Path  # RSA 1024, which OpenSSL refuses to serve with
    weak_key: Path

    def trusting(self) -> ssl.SSLContext:
        """A client's context that trusts this certificate and nothing else."""
        return ssl.create_default_context(cafile=str(self.cert))


def _pem_key(key: PrivateKey, password: bytes | None = None) -> bytes:
    encryption = (
        serialization.BestAvailableEncryption(password)
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


def _self_signed(key: PrivateKey) -> bytes:
    """A PEM certificate for 127.0.0.1 and localhost, signed by ``key`` itself."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    """A certificate with its key, and keys and a certificate that will not do."""
    folder = tmp_path_factory.mktemp("tls")
    made = Files(*(folder / f.name for f in dataclasses.fields(Files)))
    key = ec.generate_private_key(ec.SECP256R1())
    made.cert.write_bytes(_self_signed(key))
    made.key.write_bytes(_pem_key(key))
    made.other_key.write_bytes(_pem_key(ec.generate_private_key(ec.SECP256R1())))
    made.encrypted_key.write_bytes(_pem_key(key, b"a password"))
    weak = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    made.weak_cert.write_bytes(_self_signed(weak))
    made.weak_key.write_bytes(_pem_key(weak))
    return made


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "ledger.db")
    new_ledger(path).dispose()
    return path


def test_serve_answers_over_https_and_only_over_https(tmp_path: Path, files: Files) -> None:
    db = str(tmp_path / "ledger.db")
    store = new_ledger(db)
    token = make_token(Ledger(store), "n8n")
    store.dispose()
    port = free_port()
    log = tmp_path / "serve.log"
    tls = ("--tls-cert", str(files.cert), "--tls-key", str(files.key))
    patient = {"FLOWLEDGER_CONFIG": str(patient_config_file(tmp_path))}  # no 503 for load
    proc = serve_process(db, port, env=patient, log=log, args=("--host", "127.0.0.1", *tls))
    try:
        wait_until_serving(f"https://127.0.0.1:{port}", proc, verify=files.trusting())
        for host in ("127.0.0.1", "localhost"):  # the certificate names both
            https = f"https://{host}:{port}"
            with httpx.Client(base_url=https, verify=files.trusting(), timeout=TIMEOUT) as c:
                answer = c.post(
                    f"/v1/operations/tls-{host}/dispatch",
                    json=dispatch_body(f"exec-{host}"),
                    headers=auth(token),
                )
            assert answer.status_code == 200, answer.text
            assert answer.json()["decision"] == "go"
        with pytest.raises(httpx.TransportError):  # plain HTTP on the same port
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=TIMEOUT)
        with pytest.raises(httpx.ConnectError):  # a client that does not trust it
            httpx.get(f"https://127.0.0.1:{port}/healthz", timeout=TIMEOUT)
    finally:
        stop(proc)
    text = log.read_text()
    assert f"listening on https://127.0.0.1:{port} " in text
    assert WARNING not in text
    assert "Traceback" not in text


def test_run_takes_its_tls_files_from_the_settings_file(
    tmp_path: Path, files: Files, db: str
) -> None:
    config = tmp_path / "flowledger.toml"
    config.write_text(
        "[receiver]\n"
        "host = '0.0.0.0'\n"  # served on every address with TLS: no warning
        f"tls_cert = {json.dumps(str(files.cert))}\n"
        f"tls_key = {json.dumps(str(files.key))}\n"
        "max_connections_per_client = 1\n"
    )
    port = free_port()
    log = tmp_path / "run.log"
    proc = spawn(["run", "--port", str(port)], env_for(db, config), log)
    try:
        wait_until_serving(f"https://127.0.0.1:{port}", proc, verify=files.trusting())
        # Over TLS too, a client past its per-client cap is answered 429 (once its handshake
        # is done), while the connection it holds is served.
        held, over = (_tls_socket(port, files) for _ in range(2))
        with held, over:
            held.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
            over.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert over.recv(4096).startswith(b"HTTP/1.1 429 Too Many Requests\r\n")
            held.sendall(b"\r\n")
            assert held.recv(4096).startswith(b"HTTP/1.1 200 OK\r\n")
    finally:
        stop(proc)
    text = log.read_text()
    assert f"flowledger API on https://0.0.0.0:{port} (docs at /docs" in text
    assert f"listening on https://0.0.0.0:{port} " in text
    assert WARNING not in text


def _tls_socket(port: int, files: Files) -> ssl.SSLSocket:
    """A TLS connection from 127.0.0.2: a client of its own, not the trusted 127.0.0.1."""
    raw = socket.create_connection(("127.0.0.1", port), TIMEOUT, source_address=("127.0.0.2", 0))
    return files.trusting().wrap_socket(raw, server_hostname="localhost")


@pytest.mark.parametrize(("host", "warnings"), [("0.0.0.0", 1), ("127.0.0.1", 0)])
def test_plain_http_beyond_loopback_is_one_warning_line_at_start(
    tmp_path: Path, db: str, host: str, warnings: int
) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    proc = serve_process(db, port, log=log, args=("--host", host))
    try:
        wait_until_serving(f"http://127.0.0.1:{port}", proc)
    finally:
        stop(proc)
    lines = log.read_text().splitlines()
    said = [line for line in lines if WARNING in line]
    assert len(said) == warnings
    if warnings:
        assert said[0].endswith(
            f"WARNING uvicorn.error: serving on 0.0.0.0:{port} {WARNING}; give --tls-cert and "
            "--tls-key, or keep it on 127.0.0.1 behind a TLS proxy (docs/production.md)"
        )
        listening = next(n for n, line in enumerate(lines) if "listening on" in line)
        assert lines.index(said[0]) < listening  # said first, at start


def test_loopback_is_127_0_0_0_8_and_1_and_localhost() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "localhost", "::1"):
        try:
            sock = listen(host, 0)
        except CannotListen:  # a machine without IPv6
            assert host == "::1"
            continue
        with sock:
            assert loopback(sock), host
    for host in ("0.0.0.0", ""):  # every address
        with listen(host, 0) as sock:
            assert not loopback(sock), host


def _bad_cases(files: Files, tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    missing = tmp_path / "missing.pem"
    cert, key = str(files.cert), str(files.key)
    return {
        "only the cert": (
            ["--tls-cert", cert],
            "a TLS certificate needs its key: give --tls-key ([receiver] tls_key)",
        ),
        "only the key": (
            ["--tls-key", key],
            "a TLS key needs its certificate: give --tls-cert ([receiver] tls_cert)",
        ),
        "no cert file": (
            ["--tls-cert", str(missing), "--tls-key", key],
            f"cannot read the TLS certificate {missing}: no such file or directory",
        ),
        "no key file": (
            ["--tls-cert", cert, "--tls-key", str(missing)],
            f"cannot read the TLS key {missing}: no such file or directory",
        ),
        "a directory": (
            ["--tls-cert", str(tmp_path), "--tls-key", key],
            f"cannot read the TLS certificate {tmp_path}: is a directory",
        ),
        "not a cert": (
            ["--tls-cert", str(junk), "--tls-key", key],
            f"the TLS certificate {junk} holds no PEM certificate",
        ),
        "not a key": (
            ["--tls-cert", cert, "--tls-key", cert],
            f"the TLS key {cert} holds no PEM private key the server can use",
        ),
        "encrypted key": (
            ["--tls-cert", cert, "--tls-key", str(files.encrypted_key)],
            f"the TLS key {files.encrypted_key} is encrypted: give it unencrypted (readable by "
            "the ledger's user only)",
        ),
        "another key": (
            ["--tls-cert", cert, "--tls-key", str(files.other_key)],
            f"the TLS key {files.other_key} is not the key of the certificate {cert}",
        ),
        "a weak key": (
            ["--tls-cert", str(files.weak_cert), "--tls-key", str(files.weak_key)],
            f"cannot serve with the TLS certificate {files.weak_cert} and key {files.weak_key}: "
            "the certificate's key is too small (RSA needs 2048 bits or more)",
        ),
    }


CASES = [
    "only the cert",
    "only the key",
    "no cert file",
    "no key file",
    "a directory",
    "not a cert",
    "not a key",
    "encrypted key",
    "another key",
    "a weak key",
]


def _accepted(cert: Path, key: Path) -> bool:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except ssl.SSLError:
        return False
    return True


def _flowledger(
    tmp_path: Path, db: str, *args: str, settings: str = ""
) -> subprocess.CompletedProcess[bytes]:
    config = tmp_path / "flowledger.toml"
    config.write_text(settings)
    return subprocess.run(
        [FLOWLEDGER, *args],
        env=env_for(db, config),
        cwd=tmp_path,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )


@pytest.mark.parametrize("command", ["serve", "run"])
@pytest.mark.parametrize("case", CASES)
def test_bad_tls_files_are_one_line_and_exit_2_before_the_port_is_bound(
    tmp_path: Path, files: Files, db: str, taken: int, command: str, case: str
) -> None:
    if case == "a weak key" and _accepted(files.weak_cert, files.weak_key):
        pytest.skip("this machine's OpenSSL serves with RSA 1024 (security level 1 or below)")
    # On a port that is taken: the TLS files are checked before the port is tried.
    args, said = _bad_cases(files, tmp_path)[case]
    done = _flowledger(tmp_path, db, command, "--host", "127.0.0.1", "--port", str(taken), *args)
    assert (done.returncode, done.stdout, done.stderr.decode()) == (2, b"", f"flowledger: {said}\n")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 0000")
def test_an_unreadable_key_is_one_line(tmp_path: Path, files: Files, db: str) -> None:
    key = tmp_path / "unreadable.key"
    key.write_bytes(files.key.read_bytes())
    key.chmod(0)
    done = _flowledger(tmp_path, db, "serve", "--tls-cert", str(files.cert), "--tls-key", str(key))
    assert (done.returncode, done.stderr.decode()) == (
        2,
        f"flowledger: cannot read the TLS key {key}: permission denied\n",
    )


def test_the_settings_file_is_checked_as_the_options_are(
    tmp_path: Path, files: Files, db: str
) -> None:
    cert = json.dumps(str(files.cert))
    only_cert = _flowledger(tmp_path, db, "run", settings=f"[receiver]\ntls_cert = {cert}\n")
    assert (only_cert.returncode, only_cert.stderr.decode()) == (
        2,
        "flowledger: a TLS certificate needs its key: give --tls-key ([receiver] tls_key)\n",
    )
    folder = json.dumps(str(tmp_path))
    a_folder = _flowledger(tmp_path, db, "serve", settings=f"[receiver]\ntls_key = {folder}\n")
    assert (a_folder.returncode, a_folder.stderr.decode()) == (
        2,
        f"flowledger: {tmp_path / 'flowledger.toml'}: receiver.tls_key: tls_key must name a "
        "file, not a directory\n",
    )
    # An option wins over its setting: the file's wrong key is not the one used.
    other = json.dumps(str(files.other_key))
    config = tmp_path / "flowledger.toml"
    config.write_text(f"[receiver]\ntls_cert = {cert}\ntls_key = {other}\n")
    port = free_port()
    args = ["serve", "--port", str(port), "--tls-key", str(files.key)]
    proc = spawn(args, env_for(db, config), tmp_path / "serve.log")
    try:
        wait_until_serving(f"https://127.0.0.1:{port}", proc, verify=files.trusting())
    finally:
        stop(proc)
