// What happened to one tool call: the recorded answer, the operation(s), and each outbox row with
// every delivery attempt as a timeline.
import { ApiError, ops } from "./api.js";
import { age, badge, h, ms, notice, plural, replace, timeEl, traceHref, when } from "./dom.js";
import { requeueButton } from "./outbox.js";

function fields(pairs) {
  return h("dl", { class: "fields" }, pairs.filter(([, v]) => v !== undefined).flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v ?? "–")]));
}

// The OpenTelemetry trace that recorded the answer: its id, a link when TRACE_URL_TEMPLATE names
// the operators' tracing UI, "not traced" otherwise.
function traceIdField(answer) {
  if (!answer.trace_id) {
    return h("span", { class: "muted", "data-testid": "trace-id" }, "not traced");
  }
  const id = h("span", { class: "mono", "data-testid": "trace-id" }, answer.trace_id);
  if (!answer.trace_url) {
    return id;
  }
  return h("a", { href: answer.trace_url, rel: "noopener noreferrer", target: "_blank", "data-testid": "trace-url" }, id);
}

function answerSection(answer) {
  if (!answer) {
    return h("section", { class: "panel", "data-testid": "trace-answer" }, h("h2", {}, "Recorded answer"),
      h("p", { class: "muted" }, "No answer recorded under this id (401, 404 and 422 are never recorded)."));
  }
  const ok = answer.status_code < 400;
  return h("section", { class: "panel", "data-testid": "trace-answer" },
    h("h2", {}, "Recorded answer ", h("span", { class: `code ${ok ? "ok" : "bad"}` }, String(answer.status_code))),
    fields([["tool", answer.tool], ["conversation", answer.conversation_id], ["answered at", timeEl(answer.created_at)],
      ["trace", traceIdField(answer)]]),
    h("pre", { class: "json" }, JSON.stringify(answer.response, null, 2)));
}

function operationSection(operation, toolCallId) {
  const named = operation.tool_call_id !== toolCallId;
  return h("section", { class: "panel", "data-testid": "trace-operation", "data-state": operation.state },
    h("h2", {}, "Operation ", badge(operation.state), operation.reason ? h("span", { class: "muted" }, ` ${operation.reason}`) : null),
    named ? h("p", { class: "muted" }, "Named in the answer; started by ", h("a", { href: traceHref(operation.tool_call_id), "data-nav": true }, operation.tool_call_id), ".") : null,
    fields([
      ["operation_id", h("span", { class: "mono" }, operation.operation_id)],
      ["tool", operation.tool], ["activity", operation.activity], ["duration", age(operation.duration_seconds)],
      ["started", timeEl(operation.started_at)], ["ends", timeEl(operation.ends_at)],
      ["finalized", operation.finalized_at ? timeEl(operation.finalized_at) : "–"],
      ["lateness", operation.lateness_ms === null ? "–" : ms(operation.lateness_ms)],
    ]));
}

function attemptItem(attempt, createdAt) {
  const offset = (Date.parse(attempt.started_at) - Date.parse(createdAt)) / 1000;
  const what = attempt.status_code !== null ? `HTTP ${attempt.status_code}` : attempt.error_class;
  return h("li", { class: `step ${attempt.outcome}`, "data-testid": "attempt", "data-outcome": attempt.outcome },
    h("span", { class: "dot" }),
    h("div", { class: "step-body" },
      h("div", { class: "step-head" },
        h("strong", {}, `Attempt ${attempt.attempt}`), " ", badge(attempt.outcome), " ",
        h("span", { class: "code" }, what || "–"), " ",
        h("span", { class: "muted" }, `${ms(attempt.duration_ms)} · +${age(Math.max(offset, 0))} · `), timeEl(attempt.started_at)),
      h("div", { class: "duration" }, h("span", { class: "bar", "data-ms": attempt.duration_ms })),
      attempt.response_excerpt ? h("code", { class: "excerpt" }, attempt.response_excerpt) : null,
      h("div", { class: "muted small" }, `relay ${attempt.relay_id}`)));
}

function outboxSection(row, onRequeued) {
  const attempts = row.delivery_attempts;
  const steps = [
    h("li", { class: "step created" }, h("span", { class: "dot" }),
      h("div", { class: "step-body" }, h("strong", {}, "Result written to the outbox"), " ", timeEl(row.created_at),
        h("div", { class: "muted small" }, `sequence ${row.sequence} of ${row.conversation_id}`))),
    ...attempts.map((attempt) => attemptItem(attempt, row.created_at)),
  ];
  if (row.status === "delivered") {
    steps.push(h("li", { class: "step delivered" }, h("span", { class: "dot" }),
      h("div", { class: "step-body" }, h("strong", {}, "Delivered"), " ", timeEl(row.delivered_at))));
  } else if (row.status === "pending") {
    steps.push(h("li", { class: "step waiting" }, h("span", { class: "dot" }),
      h("div", { class: "step-body" }, h("strong", {}, "Next attempt due"), " ", timeEl(row.next_attempt_at))));
  }
  const longest = Math.max(1, ...attempts.map((a) => a.duration_ms));
  const section = h("section", { class: "panel", "data-testid": "trace-outbox", "data-event-id": row.event_id, "data-status": row.status },
    h("h2", {}, "Outbox row ", badge(row.status), " ", h("span", { class: "muted" }, plural(row.attempts, "attempt")),
      row.status === "dead" ? requeueButton(row, onRequeued) : null),
    fields([
      ["event_id", h("span", { class: "mono" }, row.event_id)],
      ["last error", row.last_error ? h("span", { class: "error-text" }, row.last_error) : "–"],
      ["lease", row.lease_owner ? `${row.lease_owner} until ${when(row.lease_expires_at)}` : "–"],
    ]),
    h("ol", { class: "timeline", "data-testid": "timeline" }, steps),
    h("details", {}, h("summary", {}, "Payload"), h("pre", { class: "json" }, JSON.stringify(row.payload, null, 2))));
  for (const bar of section.querySelectorAll(".bar")) {
    bar.style.width = `${Math.max((100 * Number(bar.dataset.ms)) / longest, 1)}%`;
  }
  return section;
}

export function traceView({ params, search }) {
  const toolCallId = params.toolCallId;
  const conversationId = new URLSearchParams(search || "").get("conversation_id") || undefined;
  if (!toolCallId) {
    const element = h("div", { class: "trace", "data-testid": "trace" }, h("h1", {}, "Tool call"),
      notice("This address names no tool call: it is not valid percent-encoding. Paste the tool_call_id in the search box above.", "info"));
    return { element, title: "Trace", refresh: async () => {} };
  }
  const message = h("div", { class: "messages" });
  const content = h("div", { class: "trace-content" }, h("p", { class: "muted" }, "Loading…"));
  const element = h("div", { class: "trace", "data-testid": "trace", "data-tool-call-id": toolCallId },
    h("h1", {}, "Tool call ", h("span", { class: "mono" }, toolCallId)), message, content);

  async function refresh() {
    let trace;
    try {
      trace = await ops.trace(toolCallId, conversationId);
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) {
        replace(content, notice(`Nothing is recorded for tool call ${toolCallId}${conversationId ? ` in conversation ${conversationId}` : ""}.`, "info"));
        return;
      }
      if (error instanceof ApiError && error.status === 409) {
        const conversations = Array.isArray(error.body?.conversation_ids) ? error.body.conversation_ids : [];
        replace(content, h("section", { class: "panel", "data-testid": "trace-ambiguous" },
          h("p", {}, `Tool call ${toolCallId} was made in ${conversations.length || "more than one"} conversations (an id is unique within its conversation). Open it in one:`),
          h("ul", {}, conversations.map((cid) => h("li", {},
            h("a", { href: traceHref(toolCallId, cid), "data-nav": true, "data-testid": "trace-conversation" }, cid))))));
        return;
      }
      throw error;
    }
    const onRequeued = (answered, error) => {
      replace(message, answered
        ? notice(`Requeued ${answered.event_id}: ${answered.status}, attempts ${answered.attempts}.`, "ok")
        : notice(`Could not requeue: ${error.message}`));
      refresh().catch(() => {});
    };
    replace(content,
      h("div", { class: "column" },
        answerSection(trace.tool_call),
        trace.operations.length ? trace.operations.map((op) => operationSection(op, toolCallId))
          : h("section", { class: "panel" }, h("h2", {}, "Operation"), h("p", { class: "muted" }, "No operation (interact.ask has none; a refused call opens none)."))),
      h("div", { class: "column" },
        trace.outbox.length ? trace.outbox.map((row) => outboxSection(row, onRequeued))
          : h("section", { class: "panel" }, h("h2", {}, "Outbox"), h("p", { class: "muted" }, "No result in the outbox yet (an operation still focusing has none)."))));
  }

  return { element, title: `Trace ${toolCallId}`, refresh };
}
