"""The checkpoint signing key as a file: made by ``flowledger key create``, read wherever a
checkpoint is signed (the CLI, the API, the anchors and witnesses jobs). A PKCS #8 PEM file,
owner-only (0600), made with ``O_EXCL`` so an existing key is never overwritten; the verifier
key goes beside it (``.pub``) for whoever checks the checkpoints. A witness's cosigning key
(``flowledger witness key create``) is the same kind of file, its vkey of type 0x04.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from flowledger.config import CheckpointsConfig
from flowledger.domain.checkpoints import (
    COSIGNATURE_V1,
    ED25519,
    CheckpointError,
    Signer,
    parse_verifier_key,
)
from flowledger.domain.cosignatures import Cosigner
from flowledger.storage.engine import LedgerError

KEY_FILE_MODE = 0o600


def public_path(path: Path) -> Path:
    return path.with_name(path.name + ".pub")


def create_key(path: Path, name: str) -> Signer:
    """A new Ed25519 key in ``path`` (which must not exist) and its verifier key beside it."""
    signer = Signer(name, _new_key(path))
    public_path(path).write_text(signer.verifier.text() + "\n", encoding="utf-8")
    return signer


def create_cosigner(path: Path, name: str) -> Cosigner:
    """A witness's new key in ``path`` (which must not exist), its vkey beside it."""
    cosigner = Cosigner(name, _new_key(path))
    public_path(path).write_text(cosigner.verifier.text() + "\n", encoding="utf-8")
    return cosigner


def _new_key(path: Path) -> Ed25519PrivateKey:
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, KEY_FILE_MODE)
    except FileExistsError:
        raise LedgerError(f"{path} exists already; a signing key is never overwritten") from None
    except FileNotFoundError:
        raise LedgerError(
            f"cannot create the key file {path}: the folder {path.parent} does not exist "
            f"(make it first, owner-only: install -d -m 700 {path.parent})"
        ) from None
    except OSError as exc:
        raise LedgerError(f"cannot create the key file {path}: {exc.strerror}") from None
    try:
        os.fchmod(fd, KEY_FILE_MODE)
        os.write(fd, pem)
        os.fsync(fd)
    finally:
        os.close(fd)
    return private


def load_signer(path: Path, name: str) -> Signer:
    """The key in ``path``, signing as ``name``; a key file others may read is refused."""
    return Signer(name, _load_key(path))


def load_cosigner(path: Path, name: str) -> Cosigner:
    """A witness's key in ``path``, cosigning as ``name``."""
    return Cosigner(name, _load_key(path))


def _load_key(path: Path) -> Ed25519PrivateKey:
    try:
        mode = path.stat().st_mode & 0o777
        pem = path.read_bytes()
    except OSError as exc:
        raise LedgerError(f"cannot read the signing key {path}: {exc.strerror}") from None
    if b"PRIVATE KEY" not in pem and _is_vkey(pem):
        raise LedgerError(
            f"{path} is a public (verifier) key: give the private key file"
            + (f" ({path.with_suffix('')})" if path.suffix == ".pub" else "")
        )
    if mode & 0o077:
        raise LedgerError(
            f"the signing key {path} is readable by others ({mode:04o}): chmod 600 it"
        )
    try:
        private = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError):
        raise LedgerError(f"{path} is not an unencrypted PEM private key") from None
    if not isinstance(private, Ed25519PrivateKey):
        raise LedgerError(f"{path} is not an Ed25519 key (`flowledger key create` makes one)")
    return private


def _is_vkey(data: bytes) -> bool:
    """Whether ``data`` reads as a verifier key (``NAME+KEYID+BASE64``), either type."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    for kind in (ED25519, COSIGNATURE_V1):
        try:
            parse_verifier_key(text, kind)
        except CheckpointError:
            continue
        return True
    return False


def configured_signer(cfg: CheckpointsConfig, name: str) -> Signer | None:
    """The signer ``[checkpoints] key`` names, or ``None`` when none is configured."""
    return load_signer(cfg.key, name) if cfg.key is not None else None
