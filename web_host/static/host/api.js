// HTTP calls of the host page: the Host API with the session cookie, the SDK API with a capability.

export class ApiError extends Error {
  constructor(status, body) {
    super(body && typeof body.message === "string" ? body.message : `HTTP ${status}`);
    this.name = "ApiError";
    this.status = status;
    this.body = body && typeof body === "object" ? body : { error: "http_error", message: this.message };
  }
}

async function call(method, path, { body, headers = {}, credentials = "same-origin", keepalive = false } = {}) {
  const init = { method, headers: { Accept: "application/json", ...headers }, credentials, keepalive };
  if (body !== undefined) {
    // The session cookie is accepted on unsafe methods only with a JSON body (CSRF check).
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    throw new ApiError(0, { error: "network_error", message: String(error && error.message) });
  }
  const text = await response.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = { error: "malformed_response", message: text.slice(0, 200) };
  }
  if (!response.ok) throw new ApiError(response.status, parsed);
  return parsed;
}

export function hostApi(conversationId) {
  const conversation = `/v1/host/conversations/${encodeURIComponent(conversationId)}`;
  const instance = (id) => `/v1/host/instances/${encodeURIComponent(id)}`;
  return {
    eventsUrl: `${conversation}/events`,
    workspace: () => call("GET", `${conversation}/workspace`),
    messages: () => call("GET", `${conversation}/messages`),
    postMessage: (text) => call("POST", `${conversation}/messages`, { body: { role: "user", text } }),
    foreground: (target) => call("POST", `${conversation}/workspace/foreground`, { body: { target } }),
    close: (instanceId) => call("POST", `${instance(instanceId)}/close`, { body: {} }),
    capability: (instanceId) => call("POST", `${instance(instanceId)}/capability`, { body: {} }),
    surfaceEvent: (instanceId, event) =>
      call("POST", `${instance(instanceId)}/surface-events`, { body: { event }, keepalive: true }),
    answer: (toolCallId, answer) =>
      call("POST", `/v1/host/interactions/${encodeURIComponent(toolCallId)}/answer`, { body: { answer } }),
    answerForms: (toolCallId, answers) =>
      call("POST", `/v1/host/interactions/${encodeURIComponent(toolCallId)}/answers`, { body: { answers } }),
  };
}

// The SDK API on behalf of one MiniApp instance: never with the session cookie.
export function sdkApi(capability) {
  const options = (body) => ({ body, credentials: "omit", headers: { Authorization: `Bearer ${capability}` } });
  return {
    context: () => call("GET", "/v1/sdk/context", options()),
    getState: () => call("GET", "/v1/sdk/state", options()),
    saveState: (data, expectedRevision) =>
      call("PUT", "/v1/sdk/state", options({ expected_revision: expectedRevision, data })),
    close: () => call("POST", "/v1/sdk/navigation/close", options({})),
  };
}
