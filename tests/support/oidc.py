"""A real OAuth 2.1 / OpenID authorization server for the tests: panva's ``oidc-provider`` on
Node 22, both installed from npm into ``.cache/oidc`` (git-ignored) on first use, run from
``tests/support/oidc_provider.mjs``. Tests skip, saying why, only when npm cannot install them.

``sign_in`` is the person at the provider's pages: it follows an authorization URL through the
provider's devInteractions login and consent and returns where the provider redirected to.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from harness.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "oidc"
SCRIPT = Path(__file__).with_name("oidc_provider.mjs")
PACKAGES = ("node@22.23.3", "oidc-provider@9.13.3")
CLIENT_SECRET = "lineup-test-client-secret-7Qm2xV9pLk"
REDIRECT_URI = "http://127.0.0.1:1/callback"
PUBLIC_CLIENT = "lineup-test"
MACHINE_CLIENT = "lineup-machine"
SHORT_CLIENT = "lineup-short"  # its tokens live 1 second


def node() -> Path:
    """Node 22 with oidc-provider beside it, installed on first use."""
    binary = CACHE / "node_modules" / ".bin" / "node"
    if not (binary.exists() and (CACHE / "node_modules" / "oidc-provider").is_dir()):
        CACHE.mkdir(parents=True, exist_ok=True)
        (CACHE / "package.json").write_text('{"private": true}\n')
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed: the tests' authorization server (oidc-provider) needs it")
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", *PACKAGES],
            cwd=CACHE,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0:
            pytest.skip(f"npm could not install {' '.join(PACKAGES)}: {done.stderr[-500:]}")
    # ESM resolves packages next to the script: run a copy of it inside the cache folder.
    shutil.copyfile(SCRIPT, CACHE / SCRIPT.name)
    return binary


@dataclass
class AuthorizationServer:
    issuer: str
    process: subprocess.Popen[bytes]
    log: Path

    def token(self, client: str, resource: str, scope: str = "mcp:tools") -> str:
        """A client_credentials access token (a JWT for ``resource``)."""
        answer = httpx.post(
            f"{self.url}/token",
            data={"grant_type": "client_credentials", "resource": resource, "scope": scope},
            auth=(client, CLIENT_SECRET),
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        return str(answer.json()["access_token"])

    @property
    def url(self) -> str:
        """Where it listens (its issuer, unless it was started under another's)."""
        return f"http://127.0.0.1:{self.port}"

    port: int = 0


@contextlib.contextmanager
def authorization_server(log_dir: Path, issuer: str | None = None) -> Iterator[AuthorizationServer]:
    """One provider process; ``issuer``: claim to be another one (a provider with keys the real
    issuer does not publish)."""
    binary = node()
    port = free_port()
    own = f"http://127.0.0.1:{port}"
    log = log_dir / f"oidc-{port}.log"
    env = {
        **os.environ,
        "ISSUER": issuer or own,
        "PORT": str(port),
        "REDIRECT_URI": REDIRECT_URI,
        "CLIENT_SECRET": CLIENT_SECRET,
    }
    with log.open("wb") as out:
        process = subprocess.Popen([binary, SCRIPT.name], cwd=CACHE, env=env, stdout=out, stderr=out)
    server = AuthorizationServer(issuer or own, process, log, port)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{own}/.well-known/openid-configuration", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"oidc-provider did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        process.wait(10)


def sign_in(authorization_url: str, login: str) -> str:
    """A person signing in as ``login`` and consenting at the provider's own pages; the URL the
    provider redirects the browser to at the end (the client's redirect URI with its code)."""
    with httpx.Client(timeout=10, follow_redirects=False) as browser:
        url = authorization_url
        for _ in range(20):
            page = browser.get(url)
            while page.is_redirect:
                location = str(page.next_request.url) if page.next_request else ""
                if location.startswith(REDIRECT_URI):
                    return location
                page = browser.get(location)
            form = re.search(r'action="([^"]+)"', page.text)
            assert form is not None, page.text[:500]
            action = httpx.URL(str(page.url)).join(form.group(1))
            prompt = "login" if 'name="login"' in page.text else "consent"
            data = (
                {"prompt": prompt, "login": login, "password": "x"}
                if prompt == "login"
                else {"prompt": prompt}
            )
            answer = browser.post(action, data=data)
            assert answer.is_redirect, answer.text[:500]
            url = str(answer.next_request.url) if answer.next_request else ""
            if url.startswith(REDIRECT_URI):
                return url
        raise AssertionError("the provider's sign-in did not end at the redirect URI")
