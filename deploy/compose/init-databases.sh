#!/bin/sh
# PostgreSQL's first start (docker-entrypoint-initdb.d): a role and a database each for n8n and
# the ledger, each database owned by its role and closed to every other role. Passwords from
# the environment (compose.yaml passes them from .env).
set -eu

psql --no-psqlrc --set ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname postgres \
  --set n8n_password="$N8N_DB_PASSWORD" --set ledger_password="$LEDGER_DB_PASSWORD" <<'SQL'
CREATE ROLE n8n LOGIN PASSWORD :'n8n_password';
CREATE DATABASE n8n OWNER n8n;
REVOKE ALL ON DATABASE n8n FROM PUBLIC;

CREATE ROLE flowledger LOGIN PASSWORD :'ledger_password';
CREATE DATABASE flowledger OWNER flowledger;
REVOKE ALL ON DATABASE flowledger FROM PUBLIC;
SQL
