"""``python -m flowledger.programs.verify_proof FILE --key PUB``: check a proof file from
``flowledger proof`` with no database. It imports the standard library, ``cryptography`` and the
pure modules it names (``tests/unit/test_verify_proof_imports.py`` holds it to that), so an
auditor can run it on a machine that has nothing of the ledger but this package.

Exit 0: the file proves what it says; 1: it does not (the line names what broke); 2: the file
or the key cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from flowledger.domain.checkpoints import CheckpointError, VerifierKey, parse_verifier_key
from flowledger.domain.display import counted, visible
from flowledger.domain.proofs import ProofFailure, check


def _key(value: str) -> VerifierKey:
    """The verifier key itself, or a file holding it (``flowledger key create`` writes one)."""
    text = value
    if "+" not in value or Path(value).is_file():
        try:
            text = Path(value).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CheckpointError(f"cannot read the key file {value}: {exc}") from None
    return parse_verifier_key(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m flowledger.programs.verify_proof",
        description="Check a flowledger proof file against the ledger's public key.",
    )
    parser.add_argument("file", type=Path, help="the proof file (from `flowledger proof`)")
    parser.add_argument(
        "--key", required=True, help="the verifier key NAME+ID+BASE64, or a file holding it"
    )
    args = parser.parse_args(argv)
    try:
        key = _key(args.key)
        doc = json.loads(args.file.read_text(encoding="utf-8"))
    except CheckpointError as exc:
        print(f"verify_proof: {visible(exc)}", file=sys.stderr)
        return 2
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        print(visible(f"verify_proof: cannot read {args.file}: {exc}"), file=sys.stderr)
        return 2
    try:
        proven = check(doc, key)
    except ProofFailure as exc:
        print(f"proof FAILED: {visible(exc)}")
        return 1
    cp = proven.checkpoint
    # What the file and the key say, shown as the ledger shows outside text.
    print(
        visible(
            f"proof ok: {proven.what}, in {cp.origin} at {counted(cp.size, 'event')}, "
            f"signed by {key.name}"
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
