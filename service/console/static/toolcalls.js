// The tool calls the Agent made in the last hour, newest first — every recorded answer, also those
// that start nothing (an answered call, refusals) — each linking to its trace.
import { ops } from "./api.js";
import { h, replace, timeEl, traceHref } from "./dom.js";

// The Tools of the apps this service runs: the page shell names them (service/console/pages.py).
const TOOLS = (document.querySelector('meta[name="lineup-tools"]')?.content || "").split(",").filter(Boolean);

export function toolCallsView({ search, navigate }) {
  const params = new URLSearchParams(search);
  const tool = TOOLS.includes(params.get("tool")) ? params.get("tool") : "";
  const conversation = params.get("conversation") || "";
  const body = h("tbody", {});
  const form = h("form", { class: "filters", "data-testid": "tool-calls-filters" },
    h("label", {}, "Tool ", h("select", { name: "tool" }, h("option", { value: "" }, "any"),
      TOOLS.map((t) => h("option", { value: t, selected: t === tool }, t)))),
    h("label", {}, "Conversation ", h("input", { name: "conversation", value: conversation, maxlength: 255, placeholder: "conversation_id" })),
    h("button", { type: "submit" }, "Filter"),
    h("a", { href: "/ops/tool-calls", "data-nav": true, class: "clear" }, "Clear"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const next = new URLSearchParams();
    if (data.get("tool")) next.set("tool", data.get("tool"));
    if (data.get("conversation").trim()) next.set("conversation", data.get("conversation").trim());
    navigate(`/ops/tool-calls${next.toString() ? `?${next}` : ""}`);
  });
  const element = h("div", { class: "tool-calls" }, h("h1", {}, "Tool calls, last hour"),
    h("p", { class: "muted small" }, "Every answer the Agent got, newest first: also the calls that start nothing, such as direct tools' answers and refusals (401, 404 and 422 are never recorded)."),
    form,
    h("div", { class: "table-wrap" }, h("table", { class: "rows", "data-testid": "tool-calls-table" },
      h("thead", {}, h("tr", {}, ["Answered", "Tool call", "Tool", "Conversation", "HTTP", "Outcome"].map((t) => h("th", {}, t)))),
      body)));

  function rowEl(call) {
    return h("tr", { "data-testid": "tool-call-row", "data-tool": call.tool, "data-tool-call-id": call.tool_call_id },
      h("td", { "data-label": "Answered" }, timeEl(call.created_at)),
      h("td", { "data-label": "Tool call", class: "mono wrap" }, h("a", { href: traceHref(call.tool_call_id, call.conversation_id), "data-nav": true }, call.tool_call_id)),
      h("td", { "data-label": "Tool" }, call.tool),
      h("td", { "data-label": "Conversation", class: "wrap" }, call.conversation_id),
      h("td", { "data-label": "HTTP", class: "num" }, h("span", { class: `code ${call.status_code < 400 ? "ok" : "bad"}` }, String(call.status_code))),
      h("td", { "data-label": "Outcome" }, call.outcome || "–"));
  }

  return {
    element,
    title: "Tool calls",
    async refresh() {
      const listed = await ops.toolCalls({ tool, conversation_id: conversation, limit: 100 });
      replace(body, listed.tool_calls.length ? listed.tool_calls.map(rowEl)
        : h("tr", {}, h("td", { colspan: 6, class: "muted empty" }, "No tool calls in the last hour. Each call the Agent makes, over REST or MCP, shows here with its answer and a link to its trace.")));
    },
  };
}
