"""The harness the tests, the rigs and the benches share: processes started and stopped
(``processes``), throwaway Postgres servers and databases (``postgres``, ``database``), the
receiving Agent (``receiver``), the HTTP and MCP clients (``http_client``, ``mcp``), tool-call bodies
(``calls``), PgBouncer and nginx in front of a stack (``pgbouncer``, ``nginx``) and the previous
release (``releases``). The tests' own fixtures stay in ``tests/support``."""
