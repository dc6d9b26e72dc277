// The outbox, newest first: filters, paging by cursor, a link to each row's trace, and a requeue
// button on dead rows (the CLI's rule; the new status is shown at once, without a reload).
import { ApiError, ops } from "./api.js";
import { badge, h, notice, replace, shortIds, timeEl, traceHref } from "./dom.js";

const STATUSES = ["pending", "delivered", "dead"];

export function requeueButton(row, onDone) {
  const button = h("button", { type: "button", class: "danger", "data-testid": "requeue" }, "Requeue");
  button.addEventListener("click", async () => {
    const ok = window.confirm(
      `Requeue ${row.event_id} (tool call ${row.tool_call_id})?\n\nIt goes back to pending with 0 attempts and the same event_id; the relay delivers it again.`,
    );
    if (!ok) return;
    button.disabled = true;
    button.textContent = "Requeueing…";
    try {
      onDone(await ops.requeue(row.event_id), null);
    } catch (error) {
      onDone(null, error instanceof ApiError ? error : new ApiError(0, { message: String(error) }));
    }
  });
  return button;
}

function filtersFrom(search) {
  const params = new URLSearchParams(search);
  const status = params.get("status");
  return {
    status: STATUSES.includes(status) ? status : "",
    conversation: params.get("conversation") || "",
    tool_call: params.get("tool_call") || "",
    cursor: params.get("cursor") || "",
  };
}

function pageUrl(filters, cursor) {
  const params = new URLSearchParams();
  for (const key of ["status", "conversation", "tool_call"]) if (filters[key]) params.set(key, filters[key]);
  if (cursor) params.set("cursor", cursor);
  const text = params.toString();
  return `/ops/outbox${text ? `?${text}` : ""}`;
}

export function outboxView({ search, navigate }) {
  const filters = filtersFrom(search);
  const message = h("div", { class: "messages" });
  const body = h("tbody", {});
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });
  const overrides = new Map(); // event_id -> row answered by a requeue, shown until the next read

  const form = h("form", { class: "filters", "data-testid": "outbox-filters" },
    h("label", {}, "Status ",
      h("select", { name: "status" }, h("option", { value: "" }, "any"),
        STATUSES.map((status) => h("option", { value: status, selected: status === filters.status }, status)))),
    h("label", {}, "Conversation ", h("input", { name: "conversation", value: filters.conversation, maxlength: 255, placeholder: "conversation_id" })),
    h("label", {}, "Tool call ", h("input", { name: "tool_call", value: filters.tool_call, maxlength: 255, placeholder: "tool_call_id prefix" })),
    h("button", { type: "submit" }, "Filter"),
    h("a", { href: "/ops/outbox", "data-nav": true, class: "clear" }, "Clear"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    navigate(pageUrl({ status: data.get("status"), conversation: data.get("conversation").trim(), tool_call: data.get("tool_call").trim() }));
  });

  const title = filters.status === "dead" ? "Dead rows" : "Outbox";
  const element = h("div", { class: "outbox" },
    h("h1", {}, title),
    form,
    message,
    h("div", { class: "table-wrap" },
      h("table", { class: "rows", "data-testid": "outbox-table" },
        h("thead", {}, h("tr", {}, ["Status", "Event", "Tool call", "Conversation · result", "Tool", "Attempts", "Created", "Next / delivered", "Last error"].map((t) => h("th", {}, t)), h("th", {}, h("span", { class: "visually-hidden" }, "Actions")))),
        body)),
    pager);

  function rowEl(row) {
    const shown = overrides.get(row.event_id) || row;
    const cells = [
      h("td", { "data-label": "Status" }, badge(shown.status)),
      h("td", { "data-label": "Event", class: "mono", title: shown.event_id }, cut(shown.event_id)),
      h("td", { "data-label": "Tool call", class: "mono wrap" },
        h("a", { href: traceHref(shown.tool_call_id, shown.conversation_id), "data-nav": true, "data-testid": "trace-link" }, shown.tool_call_id)),
      h("td", { "data-label": "Conversation", class: "wrap" }, shown.conversation_id,
        h("span", { class: "muted", title: "The result's place in its conversation: results arrive in this order." }, ` · result ${shown.sequence}`)),
      h("td", { "data-label": "Tool" }, shown.tool),
      h("td", { "data-label": "Attempts", class: "num" }, String(shown.attempts)),
      h("td", { "data-label": "Created" }, timeEl(shown.created_at)),
      h("td", { "data-label": shown.status === "delivered" ? "Delivered" : "Next attempt" },
        shown.status === "dead" ? "–" : timeEl(shown.status === "delivered" ? shown.delivered_at : shown.next_attempt_at)),
      h("td", { "data-label": "Last error", class: "error-text wrap" }, shown.last_error || ""),
      h("td", { class: "actions" }, shown.status === "dead" ? requeueButton(shown, (answered, error) => {
        if (answered) {
          overrides.set(answered.event_id, answered);
          replace(message, notice(`Requeued ${answered.event_id}: ${answered.status}, attempts ${answered.attempts}.`, "ok"));
        } else {
          replace(message, notice(`Could not requeue ${shown.event_id}: ${error.message}`));
        }
        current.rows = current.rows.map((r) => (r.event_id === shown.event_id && answered ? answered : r));
        draw();
      }) : null),
    ];
    return h("tr", { "data-testid": "outbox-row", "data-event-id": shown.event_id, "data-status": shown.status }, cells);
  }

  const current = { rows: [], next: null };
  let cut = shortIds([]);
  const filtered = filters.status || filters.conversation || filters.tool_call || filters.cursor;
  const emptyText = filtered
    ? "No outbox row matches these filters. Each result the Runtime owes the Agent is a row here: pending until the relay delivers it, then delivered, or dead after its last attempt."
    : "No outbox rows yet. When a tool call's operation ends (a Pomodoro completes or is stopped), its one result lands here for the relay to deliver to the Agent.";

  function draw() {
    cut = shortIds(current.rows.map((r) => r.event_id));
    if (!current.rows.length) {
      replace(body, h("tr", {}, h("td", { colspan: 10, class: "muted empty", "data-testid": "outbox-empty" }, emptyText)));
    } else {
      replace(body, current.rows.map(rowEl));
    }
    replace(pager,
      filters.cursor ? h("a", { href: pageUrl(filters), "data-nav": true }, "← Newest") : null,
      current.next ? h("a", { href: pageUrl(filters, current.next), "data-nav": true, "data-testid": "older" }, "Older →") : null);
  }

  return {
    element,
    title,
    async refresh() {
      try {
        const page = await ops.outbox({
          status: filters.status, conversation_id: filters.conversation,
          tool_call_id_prefix: filters.tool_call, cursor: filters.cursor, limit: 50,
        });
        overrides.clear();
        current.rows = page.outbox;
        current.next = page.next_cursor;
        draw();
      } catch (error) {
        if (error instanceof ApiError && error.status === 422) {
          replace(message, notice(`The filters are not valid: ${error.message}`));
          return;
        }
        throw error;
      }
    },
  };
}
