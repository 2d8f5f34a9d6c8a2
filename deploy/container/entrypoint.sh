#!/bin/sh
# The image's entrypoint: make the ledger ready, then become the command (by default
# `flowledger run --host 0.0.0.0`), so that SIGTERM reaches flowledger itself.
#
# Ready: created when missing (`init` does nothing to one that exists), and its schema brought
# up to this flowledger's after a checked backup into /data/backups (`migrate` does nothing,
# and takes no backup, when the schema is current). A PostgreSQL ledger is backed up with the
# image's pg_dump, which dumps servers of its major version and older: on a newer server the
# migration stops here, with the line that says why (docs/production.md#containers).
set -eu

flowledger init
flowledger migrate --backup-dir /data/backups
exec flowledger "$@"
