// A sign-in link may carry the token in the fragment, which is never sent to a server: drop it
// from the address bar, fill it in and say so — then wait for the operator's click. Another site
// can send anyone to such a link; it can never sign them in.
const match = window.location.hash.match(/^#token=([^&]+)$/);
if (match) {
  const form = document.querySelector('[data-testid="signin"]');
  let token = null;
  try {
    token = decodeURIComponent(match[1]);
  } catch {
    token = null;
  }
  window.history.replaceState(null, "", window.location.pathname + window.location.search);
  if (token && form && !document.querySelector('[role="alert"]')) {
    form.elements.token.value = token;
    document.querySelector('[data-testid="signin-host"]').textContent = window.location.host;
    document.querySelector('[data-testid="signin-preview"]').hidden = false;
    document.querySelector('[data-testid="signin-submit"]').focus();
  }
}
