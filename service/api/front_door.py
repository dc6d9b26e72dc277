"""``GET /``: the service's front door — a small page naming its faces (the Web Host, the operator
console, the API document, the MCP endpoint) and what each needs to sign in. No secret is on it:
it names the settings that hold the tokens, never their values."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get

from service.web.state import runtime_of

HTML = "text/html"
_CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)


def front_door_page(*, api_docs_ui: bool, mcp_oauth: bool) -> bytes:
    docs_ui = (
        '<li><a href="/schema/swagger">/schema/swagger</a>: the same document to browse (Swagger UI)</li>'
        if api_docs_ui
        else "<li>To browse it in a page, start the service with <code>API_DOCS_UI=true</code>"
        " (then <code>/schema/swagger</code>).</li>"
    )
    oauth = " or a person's OAuth access token from the configured authorization server" if mcp_oauth else ""
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Lineup Runtime</title>
<link rel="icon" href="/host/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/host/host.css">
</head>
<body class="signin">
<main class="signin-card front-door" data-testid="front-door">
<h1>Lineup Runtime</h1>
<p>This service runs MiniApp tools, such as the Pomodoro focus timer, for an AI Agent. Its faces:</p>
<section aria-labelledby="door-host">
<h2 id="door-host"><a href="/host/" data-testid="door-host">Web Host</a></h2>
<p>The person's page: a conversation with the Agent and the running MiniApp.
Sign in with a host session token (a Host backend mints one with <code>HOST_TOKEN</code>;
<code>make dev</code> prints a ready sign-in link for its demo person).</p>
</section>
<section aria-labelledby="door-console">
<h2 id="door-console"><a href="/ops/" data-testid="door-console">Operator console</a></h2>
<p>The outbox, operations, tool calls and traces. Sign in with <code>OPERATOR_TOKEN</code>
(<code>make dev</code> prints a link that fills it in).</p>
</section>
<section aria-labelledby="door-api">
<h2 id="door-api"><a href="/schema/openapi.json" data-testid="door-api">API document</a></h2>
<ul>
<li><a href="/schema/openapi.json">/schema/openapi.json</a> (and <code>/schema/openapi.yaml</code>):
the OpenAPI document of the REST API, readable without a token; its calls need
<code>Authorization: Bearer</code> with <code>AGENT_TOKEN</code>, <code>HOST_TOKEN</code>
or <code>OPERATOR_TOKEN</code>, as each path says.</li>
{docs_ui}
</ul>
</section>
<section aria-labelledby="door-mcp">
<h2 id="door-mcp">MCP endpoint</h2>
<p><code data-testid="door-mcp">/mcp</code> (streamable HTTP) for an MCP client, with
<code>Authorization: Bearer</code> and <code>AGENT_TOKEN</code>{oauth}; each
<code>tools/call</code> names its conversation in
<code>params._meta["io.lineup/conversation_id"]</code>.</p>
</section>
<p>Probes: <a href="/healthz">/healthz</a>, <a href="/readyz">/readyz</a>.</p>
</main>
</body>
</html>
""".encode()


@get("/", include_in_schema=False)
async def front_door(request: Request[Any, Any, Any]) -> Response[bytes]:
    settings = runtime_of(request).settings
    body = front_door_page(api_docs_ui=settings.api_docs_ui, mcp_oauth=bool(settings.mcp_oauth_issuer))
    return Response(
        body,
        media_type=HTML,
        headers={
            "Content-Security-Policy": _CSP,
            "X-Frame-Options": "DENY",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-store",
        },
    )
