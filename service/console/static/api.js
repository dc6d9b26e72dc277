// The ops API with the console's session cookie. A write sends JSON (the cookie is accepted on a
// write only with Content-Type: application/json from this origin).

export class ApiError extends Error {
  constructor(status, body) {
    super(body && typeof body.message === "string" ? body.message : `HTTP ${status}`);
    this.name = "ApiError";
    this.status = status;
    this.code = body && typeof body.error === "string" ? body.error : "http_error";
    this.body = body;
  }
}

async function call(method, path, body) {
  const init = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    throw new ApiError(0, { error: "network_error", message: `the service did not answer (${error.message})` });
  }
  let parsed = null;
  try {
    parsed = await response.json();
  } catch {
    parsed = null;
  }
  if (!response.ok) throw new ApiError(response.status, parsed);
  return parsed;
}

function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value) search.set(key, value);
  const text = search.toString();
  return text ? `?${text}` : "";
}

export const ops = {
  overview: () => call("GET", "/v1/ops/overview"),
  outbox: (filters) => call("GET", `/v1/ops/outbox${query(filters)}`),
  operations: (filters) => call("GET", `/v1/ops/operations${query(filters)}`),
  toolCalls: (filters) => call("GET", `/v1/ops/tool-calls${query(filters)}`),
  trace: (toolCallId, conversationId) =>
    call("GET", `/v1/ops/tool-calls/${encodeURIComponent(toolCallId)}${query({ conversation_id: conversationId })}`),
  requeue: (eventId) => call("POST", `/v1/ops/outbox/${encodeURIComponent(eventId)}/requeue`, {}),
  delivery: () => call("GET", "/v1/ops/delivery"),
  pause: (reason) => call("POST", "/v1/ops/delivery/pause", reason ? { reason } : {}),
  resume: () => call("POST", "/v1/ops/delivery/resume", {}),
  recover: (filters) => call("POST", "/v1/ops/outbox/recover", filters),
};
