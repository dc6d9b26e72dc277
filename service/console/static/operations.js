// Operations, newest first, with a state filter; each links to the trace of the call that started it.
import { ops } from "./api.js";
import { badge, h, ms, replace, shortIds, timeEl, traceHref } from "./dom.js";

const STATES = ["focusing", "completed", "interrupted", "cancelled", "failed"];

export function operationsView({ search, navigate }) {
  const params = new URLSearchParams(search);
  const state = STATES.includes(params.get("state")) ? params.get("state") : "";
  const conversation = params.get("conversation") || "";
  const body = h("tbody", {});
  const form = h("form", { class: "filters", "data-testid": "operations-filters" },
    h("label", {}, "State ", h("select", { name: "state" }, h("option", { value: "" }, "any"),
      STATES.map((s) => h("option", { value: s, selected: s === state }, s)))),
    h("label", {}, "Conversation ", h("input", { name: "conversation", value: conversation, maxlength: 255, placeholder: "conversation_id" })),
    h("button", { type: "submit" }, "Filter"),
    h("a", { href: "/ops/operations", "data-nav": true, class: "clear" }, "Clear"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const next = new URLSearchParams();
    if (data.get("state")) next.set("state", data.get("state"));
    if (data.get("conversation").trim()) next.set("conversation", data.get("conversation").trim());
    navigate(`/ops/operations${next.toString() ? `?${next}` : ""}`);
  });
  const element = h("div", { class: "operations" }, h("h1", {}, "Operations"), form,
    h("div", { class: "table-wrap" }, h("table", { class: "rows", "data-testid": "operations-table" },
      h("thead", {}, h("tr", {}, ["State", "Operation", "Reason", "Conversation", "Tool call", "Started", "Ends", "Finalized", "Late"].map((t) => h("th", {}, t)))),
      body)));

  let cut = shortIds([]);
  function rowEl(op) {
    return h("tr", { "data-testid": "operation-row", "data-state": op.state, "data-operation-id": op.operation_id },
      h("td", { "data-label": "State" }, badge(op.state)),
      h("td", { "data-label": "Operation", class: "mono", title: op.operation_id }, cut(op.operation_id)),
      h("td", { "data-label": "Reason" }, op.reason || "–"),
      h("td", { "data-label": "Conversation", class: "wrap" }, op.conversation_id),
      h("td", { "data-label": "Tool call", class: "mono wrap" }, h("a", { href: traceHref(op.tool_call_id, op.conversation_id), "data-nav": true }, op.tool_call_id)),
      h("td", { "data-label": "Started" }, timeEl(op.started_at)),
      h("td", { "data-label": "Ends" }, timeEl(op.ends_at)),
      h("td", { "data-label": "Finalized" }, op.finalized_at ? timeEl(op.finalized_at) : "–"),
      h("td", { "data-label": "Late", class: "num" }, op.lateness_ms === null ? "–" : ms(op.lateness_ms)));
  }

  return {
    element,
    title: "Operations",
    async refresh() {
      const listed = await ops.operations({ state, conversation_id: conversation, limit: 100 });
      cut = shortIds(listed.operations.map((op) => op.operation_id));
      const empty = state || conversation
        ? "No operation matches these filters. Each pomodoro.start the Agent makes is an operation: focusing, then completed, interrupted or cancelled (or failed, when its app fails it)."
        : "No operations yet. One appears when the Agent calls pomodoro.start (a focus period), and shows how it ended.";
      replace(body, listed.operations.length ? listed.operations.map(rowEl)
        : h("tr", {}, h("td", { colspan: 9, class: "muted empty", "data-testid": "operations-empty" }, empty)));
    },
  };
}
