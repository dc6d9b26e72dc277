#!/usr/bin/env bash
# What the test suite needs from the system, installed from Debian's packages when missing:
#   chromium       the Web Host's and the console's browser tests (playwright drives /usr/bin/chromium)
#   nginx-light    the load balancer of the MCP replica tests (harness/nginx.py)
#   prometheus     promtool, which checks and unit-tests deploy/observability's alert rules
#   postgresql-15  the binaries of the tests' throwaway Postgres (harness/database.py)
#   npm            Node packages of the tests: axe-core, the OAuth provider
#   pgbouncer      the connection pooler tests
#   faketime       libfaketime, for the relay's clock test (tests/e2e/test_relay_clock.py)
# `make test` and `make install` run it (through `make system-deps`), and so does .ci/run. Without
# root or apt-get it installs nothing and says what is missing; the tests that need a missing piece
# skip and name it in the run's summary (pytest -rs). SYSTEM_DEPS=skip leaves the system alone.
# Names on the command line check those packages only: scripts/system-deps.sh nginx-light npm
set -euo pipefail

if [ "${SYSTEM_DEPS:-}" = "skip" ]; then
    exit 0
fi

# package -> the file that shows it is there
present() {
    case "$1" in
        chromium) [ -x /usr/bin/chromium ] ;;
        nginx-light) command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] ;;
        prometheus) command -v promtool >/dev/null ;;
        postgresql-15) [ -x /usr/lib/postgresql/15/bin/initdb ] ;;
        npm) command -v npm >/dev/null ;;
        pgbouncer) command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] ;;
        valgrind) command -v valgrind >/dev/null ;;
        faketime) compgen -G "/usr/lib/*/faketime/libfaketime.so.1" >/dev/null ;;
        *) dpkg -s "$1" >/dev/null 2>&1 ;;
    esac
}

if [ "$#" -gt 0 ]; then
    wanted=("$@")
else
    wanted=(chromium nginx-light prometheus postgresql-15 npm pgbouncer faketime)
fi

missing=()
for package in "${wanted[@]}"; do
    present "$package" || missing+=("$package")
done
if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    why="not root"
    command -v apt-get >/dev/null || why="no apt-get on this machine"
    echo "system-deps: missing ${missing[*]}; not installing them ($why)." >&2
    echo "system-deps: install them with your package manager (Debian: sudo apt-get install ${missing[*]})," >&2
    echo "system-deps: or go on: the tests that need them skip and say why in the summary." >&2
    exit 0
fi

echo "system-deps: installing ${missing[*]} from apt (once; SYSTEM_DEPS=skip to leave the system alone)"
if apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"; then
    exit 0
fi
# In CI a failed install fails the run; on a person's machine (no network, a held package) the
# suite still runs, and the tests that need the missing pieces skip and say why.
echo "system-deps: apt-get could not install ${missing[*]}; the tests that need them will skip" >&2
if [ -n "${CI:-}" ]; then
    exit 1
fi
