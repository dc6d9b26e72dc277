"""What the HTTP faces share, below them: REST (``service.api``), the operator console
(``service.console``) and the MCP face read the runtime from the application's state (``state``),
answer static files from a catalogue (``assets``), and check the Host's and the console's cookies
(``host_cookie``, ``console_cookie``, ``console_access``: where a console sign-in stands for the
operator token on ``/v1/ops/*``). Nothing here imports a face."""
