"""``python -m flowledger.programs.verify_proof FILE --key VKEY [--witness VKEY … --quorum N]``:
check a proof file from
``flowledger proof`` with no database. It imports the standard library, ``cryptography`` and the
pure modules it names (``tests/unit/test_verify_proof_imports.py`` holds it to that), so an
auditor can run it on a machine that has nothing of the ledger but this package.

With ``--witness`` (a witness's vkey, type 0x04; repeated) the checkpoint must also carry
``--quorum`` of their cosignatures (C2SP tlog-cosignature; every witness given when no quorum
is said). Keys are vkeys (``name+id+base64``, as Go's ``golang.org/x/mod/sumdb/note`` reads
them) or files holding one.

Exit 0: the file proves what it says; 1: it does not (the line names what broke); 2: the file
or a key cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from flowledger.domain.checkpoints import (
    COSIGNATURE_V1,
    ED25519,
    CheckpointError,
    VerifierKey,
    parse_verifier_key,
)
from flowledger.domain.display import counted, visible
from flowledger.domain.proofs import ProofFailure, check


def key_text(value: str) -> str:
    """A vkey given as itself, or the text of a file holding it (``flowledger key create``
    writes one)."""
    if "+" in value and not Path(value).is_file():
        return value
    try:
        text = Path(value).read_text(encoding="utf-8")
    except OSError as exc:
        said = (exc.strerror or str(exc)).lower()
        raise CheckpointError(
            f"{value}: not a verifier key (name+keyid+base64) nor a key file it can read: {said}"
        ) from None
    except UnicodeDecodeError:
        raise CheckpointError(f"{value}: not a key file (not UTF-8 text)") from None
    if "PRIVATE KEY" in text:
        raise CheckpointError(
            f"{value} is a private key: give its verifier key, the .pub file beside it"
        )
    return text


def _key(value: str, kind: bytes = ED25519) -> VerifierKey:
    return parse_verifier_key(key_text(value), kind)


def _log_key(value: str) -> VerifierKey:
    """``--key``: the log's key; a witness's given instead is named as such."""
    text = key_text(value)
    try:
        return parse_verifier_key(text, ED25519)
    except CheckpointError as exc:
        wrong = exc
    try:
        parse_verifier_key(text, COSIGNATURE_V1)
    except CheckpointError:
        raise wrong from None
    raise CheckpointError(
        "--key is a witness's key (type 0x04): --key wants the log's (type 0x01, "
        "`flowledger key create`'s .pub); give a witness's with --witness"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m flowledger.programs.verify_proof",
        description="Check a flowledger proof file against the ledger's public key.",
    )
    parser.add_argument("file", type=Path, help="the proof file (from `flowledger proof`)")
    parser.add_argument(
        "--key", required=True, help="the log's verifier key NAME+ID+BASE64, or a file holding it"
    )
    parser.add_argument(
        "--witness",
        action="append",
        default=[],
        metavar="VKEY",
        help="a witness's vkey (type 0x04), or a file holding it; repeat for each witness",
    )
    parser.add_argument(
        "--quorum",
        type=int,
        metavar="N",
        help="how many of the witnesses given must have cosigned [default: all of them]",
    )
    args = parser.parse_args(argv)
    quorum = len(args.witness) if args.quorum is None else args.quorum
    if args.witness and quorum == 0:
        print(
            "verify_proof: --quorum 0 checks no witness's cosignature: give 1 or more, or no "
            "--witness",
            file=sys.stderr,
        )
        return 2
    if not 0 <= quorum <= len(args.witness):
        print(
            f"verify_proof: --quorum {quorum} needs as many --witness keys "
            f"({len(args.witness)} given)",
            file=sys.stderr,
        )
        return 2
    try:
        key = _log_key(args.key)
        witnesses = [_key(w, COSIGNATURE_V1) for w in args.witness]
        text = args.file.read_text(encoding="utf-8")
        try:
            doc = json.loads(text)
        except ValueError:
            print(
                f"verify_proof: {args.file} is not a proof file (not JSON){_hint(text)}",
                file=sys.stderr,
            )
            return 2
    except CheckpointError as exc:
        print(f"verify_proof: {visible(exc)}", file=sys.stderr)
        return 2
    except RecursionError:
        print(f"verify_proof: cannot read {args.file}: JSON nested too deep", file=sys.stderr)
        return 2
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        print(visible(f"verify_proof: cannot read {args.file}: {exc}"), file=sys.stderr)
        return 2
    try:
        proven = check(doc, key, witnesses, quorum)
    except ProofFailure as exc:
        print(f"proof FAILED: {visible(exc)}")
        return 1
    except RecursionError:
        print("proof FAILED: a value in the file is nested too deep to seal")
        return 1
    cp = proven.checkpoint
    # What the file and the key say, shown as the ledger shows outside text.
    print(
        visible(
            f"proof ok: {proven.what}, in {cp.origin} at {counted(cp.size, 'event')}, "
            f"signed by {key.name}"
            + (f", cosigned by {', '.join(proven.cosigned_by)}" if proven.cosigned_by else "")
        )
    )
    return 0


def _hint(text: str) -> str:
    """What a file that is not JSON looks like, when it is something the ledger writes."""
    if "\n\n\u2014 " in text:
        return ": it reads as a checkpoint; `flowledger proof` writes the proof file"
    return ""


if __name__ == "__main__":
    sys.exit(main())
