// The Bridge: the only way a MiniApp reaches the Runtime. It accepts a message only from the
// window of the attached app iframe, only in the SDK's shape, and answers that window only. The
// capability stays here; the iframe never sees a token.

import { sdkApi } from "./api.js";

const REQUEST = "lineup:request";
const RESPONSE = "lineup:response";
const MAX_IN_FLIGHT = 8;

const isPlainObject = (value) =>
  value !== null && typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype;

const hasExactly = (value, keys) => {
  const own = Object.keys(value);
  return own.length === keys.length && keys.every((key) => Object.hasOwn(value, key));
};

const noParams = (params) => isPlainObject(params) && hasExactly(params, []);

// Each method: its params check and the SDK API call it makes.
const METHODS = {
  context: { valid: noParams, run: (api) => api.context() },
  "state.get": { valid: noParams, run: (api) => api.getState() },
  "state.save": {
    valid: (p) =>
      isPlainObject(p) &&
      hasExactly(p, ["data", "expected_revision"]) &&
      isPlainObject(p.data) &&
      Number.isSafeInteger(p.expected_revision) &&
      p.expected_revision >= 0,
    run: (api, p) => api.saveState(p.data, p.expected_revision),
  },
  "navigation.close": { valid: noParams, run: (api) => api.close() },
};

function validRequest(data) {
  return (
    isPlainObject(data) &&
    hasExactly(data, ["id", "method", "params", "type"]) &&
    data.type === REQUEST &&
    typeof data.id === "string" &&
    data.id.length >= 1 &&
    data.id.length <= 128 &&
    typeof data.method === "string" &&
    Object.hasOwn(METHODS, data.method) &&
    METHODS[data.method].valid(data.params)
  );
}

export class Bridge {
  constructor(counterElement) {
    this.counterElement = counterElement;
    this.ignored = 0;
    this.current = null;
    window.addEventListener("message", (event) => this.receive(event));
  }

  attach(iframe, instance) {
    this.current = { iframe, instance, api: sdkApi(instance.capability), inFlight: 0 };
  }

  detach() {
    this.current = null;
  }

  ignore(reason, event) {
    this.ignored += 1;
    this.counterElement.dataset.bridgeIgnored = String(this.ignored);
    console.debug(`lineup bridge: ignored a message (${reason})`, event.origin);
  }

  receive(event) {
    const current = this.current;
    const frameWindow = current && current.iframe.contentWindow;
    if (!frameWindow || event.source !== frameWindow) return this.ignore("not from the app iframe", event);
    // The app iframe is sandboxed without allow-same-origin: its origin is always opaque.
    if (event.origin !== "null") return this.ignore("not an opaque origin", event);
    if (!validRequest(event.data)) return this.ignore("not an SDK request", event);
    const { id, method, params } = event.data;
    const reply = (answer) => {
      // Only the window that asked, and only while it is still the attached app.
      if (this.current === current) frameWindow.postMessage({ type: RESPONSE, id, ...answer }, "*");
    };
    if (current.inFlight >= MAX_IN_FLIGHT) {
      reply({ ok: false, error: { error: "too_many_requests", message: "too many SDK calls at once" } });
      return;
    }
    current.inFlight += 1;
    METHODS[method]
      .run(current.api, params)
      .then(
        (result) => reply({ ok: true, result }),
        (error) => reply({ ok: false, error: error.body || { error: "bridge_error", message: String(error) } }),
      )
      .finally(() => {
        current.inFlight -= 1;
      });
  }
}
