// The Lineup MiniApp SDK for an MCP Apps host (io.modelcontextprotocol/ui, 2026-01-26): the same
// `window.lineup` as the Web Host's SDK, spoken as JSON-RPC 2.0 over postMessage to the host.
//
// Plain JSON-RPC rather than the ext-apps App class: the View must stay one self-contained document
// with nothing to fetch, and it needs six messages of the protocol, not a bundle. The host tells the
// View which call it belongs to (ui/notifications/tool-result: the result of pomodoro.start, whose
// _meta carries the View token the server minted for that call's operation); every read and write
// is a tools/call of an app-only tool (visibility ["app"]) that hands the token back, which the
// host forwards to the server with its own credentials. The server, not the View, decides which
// operation that is: the token is an HMAC over the call's conversation and operation. The View
// never holds a credential and opens no connection of its own (its resource's CSP declares no
// domain).
//
// A teardown (ui/resource-teardown) is not the person leaving: nothing is sent to the server. The
// View re-reads the operation while it is focusing (MCP Apps pushes no other call's outcome to it),
// so an interrupt, a close or the deadline shows as the Runtime decided it.
(function () {
  "use strict";

  const PROTOCOL_VERSION = "2026-01-26";
  const TIMEOUT_MS = 15000;
  const VIEW_TOKEN = "io.lineup/view_token";
  const REREAD_MS = 2000;
  // The names tools/list shows (provider-safe: pomodoro.app.read is listed as pomodoro_app_read).
  const TOOLS = {
    context: "__APP_SCOPE___app_read",
    stateGet: "__APP_SCOPE___app_snapshot",
    stateSave: "__APP_SCOPE___app_save_snapshot",
    close: "__APP_SCOPE___app_close",
  };
  const pending = new Map();
  let sequence = 0;
  let viewToken = null;
  let failure = null;
  let focusing = true;
  const waiters = [];

  class LineupError extends Error {
    constructor(body) {
      const shaped = body && typeof body === "object" ? body : { error: "sdk_error", message: String(body) };
      super(typeof shaped.message === "string" ? shaped.message : shaped.error);
      Object.assign(this, shaped);
      this.name = "LineupError";
      this.body = shaped;
    }
  }

  const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
  const post = (message) => window.parent.postMessage({ jsonrpc: "2.0", ...message }, "*");

  function request(method, params) {
    if (window.parent === window) {
      return Promise.reject(new LineupError({ error: "no_host", message: "this page is not inside an MCP Apps host" }));
    }
    sequence += 1;
    const id = sequence;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new LineupError({ error: "timeout", message: `${method} got no answer within ${TIMEOUT_MS} ms` }));
      }, TIMEOUT_MS);
      pending.set(id, { resolve, reject, timer });
      post({ id, method, params });
    });
  }

  function notify(method, params) {
    if (window.parent !== window) post({ method, params });
  }

  // The token of the call this View is for: minted by the server into the call's result (or its
  // task's), never chosen by the View.
  function tokenOf(result) {
    const meta = isObject(result._meta) ? result._meta : {};
    const token = meta[VIEW_TOKEN];
    return { token: typeof token === "string" && token.length > 0 ? token : null, body: result.structuredContent };
  }

  function settleWaiters() {
    while (waiters.length) {
      const waiter = waiters.shift();
      if (viewToken) waiter.resolve(viewToken);
      else waiter.reject(failure);
    }
  }

  function toolResult(result) {
    const found = tokenOf(result || {});
    if (found.token) {
      viewToken = found.token;
      failure = null;
    } else if (!viewToken) {
      const body = isObject(found.body) ? found.body : {};
      failure = new LineupError(
        body.error
          ? body
          : { error: "no_view_token", message: "the host gave this View no token of its call (_meta." + VIEW_TOKEN + ")" },
      );
    }
    settleWaiters();
    refresh();
  }

  function boundToken() {
    if (viewToken) return Promise.resolve(viewToken);
    if (failure) return Promise.reject(failure);
    return new Promise((resolve, reject) => waiters.push({ resolve, reject }));
  }

  async function callTool(name, args) {
    const view_token = await boundToken();
    const result = await request("tools/call", { name, arguments: { ...args, view_token } });
    const body = result && result.structuredContent;
    if (!result || result.isError) throw new LineupError(body || { error: "tool_error", message: `${name} failed` });
    return body;
  }

  function applyHostContext(context) {
    if (!isObject(context)) return;
    const root = document.documentElement;
    if (context.theme === "dark" || context.theme === "light") {
      root.dataset.theme = context.theme;
      root.style.colorScheme = context.theme;
    }
    if (typeof context.displayMode === "string") root.dataset.displayMode = context.displayMode;
  }

  // Asks the app (pomodoro.js) to read its context again.
  function refresh() {
    document.dispatchEvent(new CustomEvent("lineup:refresh"));
  }

  function answerHost(data) {
    if (data.method === "ui/resource-teardown" || data.method === "ping") {
      post({ id: data.id, result: {} });
    } else {
      post({ id: data.id, error: { code: -32601, message: "Method not found" } });
    }
  }

  window.addEventListener("message", (event) => {
    if (event.source !== window.parent) return;
    const data = event.data;
    if (!isObject(data) || data.jsonrpc !== "2.0") return;
    if (data.method && data.id !== undefined) {
      answerHost(data);
    } else if (data.method === "ui/notifications/tool-result") {
      toolResult(data.params);
    } else if (data.method === "ui/notifications/tool-input") {
      const activity = isObject(data.params) && isObject(data.params.arguments) ? data.params.arguments.activity : null;
      const heading = document.querySelector('[data-testid="activity"]');
      if (!viewToken && heading && typeof activity === "string" && activity) heading.textContent = activity;
    } else if (data.method === "ui/notifications/tool-cancelled" && !viewToken) {
      failure = new LineupError({ error: "tool_cancelled", message: (data.params && data.params.reason) || "the call was cancelled" });
      settleWaiters();
    } else if (data.method === "ui/notifications/host-context-changed") {
      applyHostContext(data.params);
    } else if (data.id !== undefined && pending.has(data.id)) {
      const waiting = pending.get(data.id);
      pending.delete(data.id);
      clearTimeout(waiting.timer);
      if (data.error) waiting.reject(new LineupError({ error: "host_error", message: data.error.message, code: data.error.code }));
      else waiting.resolve(data.result);
    }
  });

  async function context() {
    const found = await callTool(TOOLS.context, {});
    focusing = Boolean(found && found.operation && found.operation.state === "focusing");
    return found;
  }

  window.lineup = Object.freeze({
    LineupError,
    // {app_scope, instance_id, conversation_id, status, operation, server_time}
    context,
    state: Object.freeze({
      get: () => callTool(TOOLS.stateGet, {}),
      save: (data, expectedRevision) => {
        if (!isObject(data) || !Number.isSafeInteger(expectedRevision) || expectedRevision < 0) {
          return Promise.reject(
            new LineupError({ error: "invalid_request", message: "save(data: object, expectedRevision: integer >= 0)" }),
          );
        }
        return callTool(TOOLS.stateSave, { data, expected_revision: expectedRevision });
      },
    }),
    navigation: Object.freeze({
      // The same lifecycle close as the Web Host's; the View then shows how the period ended.
      close: () =>
        callTool(TOOLS.close, {}).then((closed) => {
          refresh();
          return closed;
        }),
    }),
  });

  const size = () => {
    const box = document.documentElement.getBoundingClientRect();
    notify("ui/notifications/size-changed", { width: Math.ceil(box.width), height: Math.ceil(box.height) });
  };

  request("ui/initialize", {
    appInfo: { name: "lineup-__APP_SCOPE__", version: "1" },
    appCapabilities: { availableDisplayModes: ["inline"] },
    protocolVersion: PROTOCOL_VERSION,
  })
    .then((initialized) => {
      applyHostContext(initialized && initialized.hostContext);
      notify("ui/notifications/initialized", {});
      size();
      if (typeof ResizeObserver === "function") new ResizeObserver(size).observe(document.body);
    })
    .catch((error) => {
      failure = error;
      settleWaiters();
    });
  setInterval(() => {
    if (viewToken && focusing) refresh();
  }, REREAD_MS);
})();
