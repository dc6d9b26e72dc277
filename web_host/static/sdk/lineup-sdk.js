// The Lineup MiniApp SDK: a classic script that defines `lineup` in a sandboxed app page.
//
// Every call is a postMessage to the host page ({type, id, method, params}); the host makes the
// HTTP call with this instance's capability and answers {type, id, ok, result | error}. The app
// never holds a token and cannot reach the network itself (its CSP says connect-src 'none').
// A failed call rejects with a LineupError carrying the contract's error body
// ({error, message, ...}) as its own properties and as `body`.
(function () {
  "use strict";

  const REQUEST = "lineup:request";
  const RESPONSE = "lineup:response";
  const TIMEOUT_MS = 10000;
  // The host page is served from the same origin as this page's URL (the document itself is
  // sandboxed, so its own origin is opaque; location still names where it came from).
  const HOST_ORIGIN = window.location.origin;
  const pending = new Map();
  let sequence = 0;

  class LineupError extends Error {
    constructor(body) {
      const shaped = body && typeof body === "object" ? body : { error: "sdk_error", message: String(body) };
      super(typeof shaped.message === "string" ? shaped.message : shaped.error);
      Object.assign(this, shaped);
      this.name = "LineupError";
      this.body = shaped;
    }
  }

  function request(method, params) {
    if (window.parent === window) {
      return Promise.reject(new LineupError({ error: "no_host", message: "this page is not inside a Lineup host" }));
    }
    sequence += 1;
    const id = `${Date.now().toString(36)}-${sequence}-${Math.random().toString(36).slice(2, 8)}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new LineupError({ error: "timeout", message: `${method} got no answer within ${TIMEOUT_MS} ms` }));
      }, TIMEOUT_MS);
      pending.set(id, { resolve, reject, timer });
      window.parent.postMessage({ type: REQUEST, id, method, params }, HOST_ORIGIN);
    });
  }

  window.addEventListener("message", (event) => {
    if (event.source !== window.parent || event.origin !== HOST_ORIGIN) return;
    const data = event.data;
    if (!data || typeof data !== "object" || data.type !== RESPONSE || typeof data.id !== "string") return;
    const waiting = pending.get(data.id);
    if (!waiting) return;
    pending.delete(data.id);
    clearTimeout(waiting.timer);
    if (data.ok === true) waiting.resolve(data.result);
    else waiting.reject(new LineupError(data.error));
  });

  const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);

  window.lineup = Object.freeze({
    LineupError,
    // {app_scope, instance_id, conversation_id, status, operation, server_time}
    context: () => request("context", {}),
    state: Object.freeze({
      // {schema_version, revision, data, readonly}
      get: () => request("state.get", {}),
      // Compare-and-set: resolves {revision}; a stale expectedRevision rejects with revision_conflict.
      save: (data, expectedRevision) => {
        if (!isObject(data) || !Number.isSafeInteger(expectedRevision) || expectedRevision < 0) {
          return Promise.reject(
            new LineupError({ error: "invalid_request", message: "save(data: object, expectedRevision: integer >= 0)" }),
          );
        }
        return request("state.save", { data, expected_revision: expectedRevision });
      },
    }),
    navigation: Object.freeze({
      // Asks the Runtime to close this instance (the same lifecycle close as the host's).
      close: () => request("navigation.close", {}),
    }),
  });
})();
