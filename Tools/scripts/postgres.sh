#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests: its own directory, loopback only, stopped by `stop`.
#   bash Tools/scripts/postgres.sh start DIR [PORT]   # prints the connection string on stdout
#   bash Tools/scripts/postgres.sh stop DIR
# initdb and postgres refuse to run as root, so as root the cluster runs as the `postgres` user.
# Needs the `postgresql` package (Tools/scripts/install-deps.sh postgresql installs it).
set -euo pipefail
command="${1:-}"; dir="${2:-}"
if [ -z "$command" ] || [ -z "$dir" ]; then
  echo "usage: postgres.sh start DIR [PORT] | stop DIR" >&2; exit 2
fi
bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
  echo "postgres.sh: no PostgreSQL server found under /usr/lib/postgresql; install the postgresql package" >&2; exit 1
fi
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
case "$command" in
  start)
    port="${3:-}"
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; fi
    as_owner "$bin/initdb" -D "$dir/data" -U chronicle --auth=trust --encoding=UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    # With no port given: a random one on loopback, another if it is taken.
    for attempt in 1 2 3 4 5 6 7 8; do
      try="${port:-$((20000 + RANDOM % 40000))}"
      if (exec 3<>"/dev/tcp/127.0.0.1/$try") 2>/dev/null; then [ -n "$port" ] && break; continue; fi
      if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
          -o "-c listen_addresses=127.0.0.1 -p $try -k $dir -c max_connections=200 -c shared_buffers=128MB" start >/dev/null; then
        started="$try"; break
      fi
      [ -n "$port" ] && break
    done
    if [ -z "${started:-}" ]; then
      echo "postgres.sh: PostgreSQL did not start:" >&2; cat "$dir/server.log" >&2 2>/dev/null; exit 1
    fi
    port="$started"
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U chronicle chronicle_test
    echo "host=127.0.0.1 port=$port user=chronicle dbname=chronicle_test"
    ;;
  stop)
    if [ -f "$dir/data/postmaster.pid" ]; then
      as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
    fi
    rm -rf "$dir"
    ;;
  *)
    echo "usage: postgres.sh start DIR [PORT] | stop DIR" >&2; exit 2 ;;
esac
