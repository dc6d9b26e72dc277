// A sign-in link may carry the token in the fragment, which is never sent to a server: fill it in,
// drop it from the address bar, and sign in.
const match = window.location.hash.match(/^#token=([^&]+)$/);
if (match) {
  const form = document.querySelector('[data-testid="signin"]');
  const token = decodeURIComponent(match[1]);
  window.history.replaceState(null, "", window.location.pathname + window.location.search);
  if (form && !document.querySelector('[role="alert"]')) {
    form.elements.token.value = token;
    form.submit();
  }
}
