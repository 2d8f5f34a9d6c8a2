#!/bin/sh
# The image's entrypoint: make the ledger ready, then become the command (by default
# `flowledger run --host 0.0.0.0`), so that SIGTERM reaches flowledger itself.
#
# Ready: created when missing (`init` does nothing to one that exists), and its schema brought
# up to this flowledger's (`migrate` does nothing to a current one).
set -eu

flowledger init
flowledger migrate
exec flowledger "$@"
