// A sign-in link (`make dev` prints one) carries the token in the fragment, which is never sent to
// a server. The page drops it from the address bar, fills it in and shows whom it signs in as and
// which conversations it reaches (read without signing in) — and waits: only the person's click
// signs in. Another site can send anyone to such a link; it can never sign them in.
const match = window.location.hash.match(/^#token=([^&]+)$/);
const form = document.querySelector('[data-testid="signin"]');
const byTestId = (id) => document.querySelector(`[data-testid="${id}"]`);

function decoded(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}

function when(iso) {
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? iso : at.toLocaleString([], { dateStyle: "medium", timeStyle: "long" });
}

async function preview(token) {
  const button = byTestId("signin-submit");
  let response;
  try {
    response = await fetch("/host/session/preview", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ token }),
    });
  } catch {
    return; // the form still works by hand
  }
  const found = await response.json().catch(() => null);
  if (!response.ok || !found) {
    form.elements.token.value = "";
    const error = document.createElement("p");
    error.className = "error";
    error.setAttribute("role", "alert");
    error.textContent = "This sign-in link is not valid any more: ask for a new one.";
    form.before(error);
    return;
  }
  byTestId("signin-subject").textContent = found.subject;
  byTestId("signin-conversations").textContent =
    found.conversation_ids === null ? "every conversation" : found.conversation_ids.map((c) => `“${c}”`).join(", ");
  byTestId("signin-expires").textContent = when(found.expires_at);
  byTestId("signin-preview").hidden = false;
  button.textContent = `Sign in as ${found.subject}`;
  button.focus();
}

if (match) {
  window.history.replaceState(null, "", window.location.pathname + window.location.search);
  const token = decoded(match[1]);
  if (token && form && !document.querySelector('[role="alert"]')) {
    form.elements.token.value = token;
    preview(token);
  }
}
