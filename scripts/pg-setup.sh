#!/usr/bin/env bash
# pg-setup.sh starts the local Debian PostgreSQL cluster and creates the test
# role and database used by onceflow's PostgreSQL tests. Idempotent; run as
# root. On success the last line printed is the export to run:
#
#   eval "$(scripts/pg-setup.sh | tail -n 1)"
#
# The password is a fixed, public test password for a database that listens
# on loopback only; it protects nothing and is not a secret.
set -euo pipefail

PG_VERSION="${PG_VERSION:-15}"
PG_CLUSTER="${PG_CLUSTER:-main}"
PG_PORT="${PG_PORT:-5432}"
ROLE=onceflow
PASSWORD=onceflow-test
DB=onceflow_test

log() { echo "pg-setup: $*" >&2; }

if ! command -v pg_ctlcluster >/dev/null 2>&1; then
	log "postgresql not installed; installing it with apt-get"
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "postgresql-${PG_VERSION}" >&2 ||
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
fi

as_postgres() { runuser -u postgres -- "$@"; }

status=$(pg_lsclusters -h | awk -v v="$PG_VERSION" -v c="$PG_CLUSTER" '$1==v && $2==c {print $4}')
if [ -z "$status" ]; then
	log "cluster ${PG_VERSION}/${PG_CLUSTER} missing; creating it"
	pg_createcluster "$PG_VERSION" "$PG_CLUSTER" -p "$PG_PORT" >&2
	status=down
fi
if [ "$status" != online ]; then
	log "starting cluster ${PG_VERSION}/${PG_CLUSTER}"
	pg_ctlcluster "$PG_VERSION" "$PG_CLUSTER" start >&2
fi

for _ in $(seq 1 60); do
	if as_postgres pg_isready -q -h 127.0.0.1 -p "$PG_PORT"; then
		break
	fi
	sleep 0.5
done
as_postgres pg_isready -h 127.0.0.1 -p "$PG_PORT" >&2

psql_admin() { as_postgres psql -p "$PG_PORT" -v ON_ERROR_STOP=1 -qAtX "$@"; }

if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '${ROLE}'")" != 1 ]; then
	log "creating role ${ROLE}"
	psql_admin -c "CREATE ROLE ${ROLE} LOGIN PASSWORD '${PASSWORD}'"
else
	psql_admin -c "ALTER ROLE ${ROLE} LOGIN PASSWORD '${PASSWORD}'"
fi
if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = '${DB}'")" != 1 ]; then
	log "creating database ${DB}"
	psql_admin -c "CREATE DATABASE ${DB} OWNER ${ROLE}"
fi
# Tests terminate their own sink's backend (pg_terminate_backend) to simulate
# a lost connection; a role may do that to backends of the same role only
# when it is a member of pg_signal_backend.
psql_admin -c "GRANT pg_signal_backend TO ${ROLE}"

echo "export ONCEFLOW_TEST_PG_URL='postgres://${ROLE}:${PASSWORD}@127.0.0.1:${PG_PORT}/${DB}?sslmode=disable'"
