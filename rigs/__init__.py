"""Pass/fail rigs: the service, its relays and Postgres run as processes on this machine under load
and faults (a failover, kills and restarts, two processes behind one port), then checked. Each is a
module run from the repository root (``python -m rigs.failover``) and exits 1 when a check fails."""
