// The overview: rows by status, the queue's age, the last hour's deliveries and failures, deadline
// lateness — numbers first, then small charts.
import { ops } from "./api.js";
import { hbars, lines, stackedBars } from "./charts.js";
import { deliveryPanel, recoverPanel, retentionPanel } from "./delivery.js";
import { age, count, h, plural, replace } from "./dom.js";

function stat(label, value, testid, { cls = "", href, hint } = {}) {
  const body = [h("span", { class: "label" }, label), h("strong", { "data-testid": testid }, value)];
  if (hint) body.push(h("span", { class: "hint" }, hint));
  return href
    ? h("a", { class: `stat ${cls}`, href, "data-nav": true }, body)
    : h("div", { class: `stat ${cls}` }, body);
}

function panel(title, ...children) {
  return h("section", { class: "panel" }, h("h2", {}, title), ...children);
}

export function overviewView() {
  let refresh = () => {};
  const numbers = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const delivery = deliveryPanel(() => refresh());
  const retention = retentionPanel();
  const recover = recoverPanel(() => refresh());
  // The delivery controls and forms stay put across refreshes; the numbers are redrawn.
  const element = h("div", { class: "overview", "data-testid": "ops-overview" },
    h("h1", {}, "Overview"), delivery.element, numbers,
    h("div", { class: "panels" }, retention.element, recover.element));

  function draw(data) {
    const { stats, last_hour: hour, depth } = data;
    delivery.update(data.delivery, stats.server_time);
    retention.update(data.retention, stats.server_time, stats.history);
    const box = stats.outbox;
    const dead = box.by_status.dead;
    const late = hour.lateness_ms;
    const overall = stats.deadline_lateness_ms;
    const minutes = hour.minutes;
    // The samples this service kept, and the numbers read just now as the last point.
    const now = { at: stats.server_time, pending: box.by_status.pending, dead, oldest_pending_age_seconds: box.oldest_pending_age_seconds || 0 };
    const points = [...depth, now];
    replace(
      numbers,
      h("div", { class: "stats", "data-testid": "outbox-stats" },
        stat("Pending", count(box.by_status.pending), "count-pending", { href: "/ops/outbox?status=pending", hint: `${count(box.due_now)} due now` }),
        stat("Oldest pending", age(box.oldest_pending_age_seconds), "oldest-pending",
          { cls: box.oldest_pending_age_seconds > 120 ? "warn" : "" }),
        stat("Dead", count(dead), "count-dead", { cls: dead ? "bad" : "", href: "/ops/outbox?status=dead", hint: dead ? "need an operator" : "none" }),
        stat("Delivered", count(box.by_status.delivered), "count-delivered", { href: "/ops/outbox?status=delivered", hint: "in total" }),
        stat("Deliveries, last hour", count(hour.deliveries), "deliveries-hour"),
        stat("Failed attempts, last hour", count(hour.failures), "failures-hour", { cls: hour.failures ? "warn" : "" }),
        stat("Focusing now", count(stats.operations.focusing), "count-focusing", { href: "/ops/operations?state=focusing" }),
        stat("Lateness p99, last hour", late.p99 === null ? "–" : `${late.p99} ms`, "lateness-p99",
          { hint: `over ${plural(late.completed, "deadline")}` }),
      ),
      h("div", { class: "panels" },
        panel("Deliveries and failed attempts per minute, last hour",
          stackedBars(minutes, [
            { key: "delivered", label: "delivered", cls: "ok" },
            { key: "failed", label: "failed attempts", cls: "bad" },
          ], { label: "Deliveries and failed attempts per minute", testid: "chart-deliveries", first: "−60 min", middle: "−30 min", last: "now" }),
          h("p", { class: "legend" }, h("span", { class: "key ok" }), "delivered ", h("span", { class: "key bad" }), "failed (retried or dead)")),
        panel("Outbox depth, sampled every 15 s",
          // Dead is drawn dashed over pending, so that both show where they are equal (at 0, say).
          lines(points, [{ key: "pending", cls: "pending" }, { key: "dead", cls: "dead" }], {
            label: "Pending and dead rows over time", testid: "chart-depth",
            empty: "Samples appear every 15 s while the service runs.",
          }),
          h("p", { class: "legend" }, h("span", { class: "key pending" }), "pending ", h("span", { class: "key dead" }), "dead (dashed)")),
        panel("Results created per minute, last hour",
          stackedBars(minutes, [{ key: "created", label: "results created", cls: "created" }],
            { label: "Outbox rows created per minute", testid: "chart-created", first: "−60 min", middle: "−30 min", last: "now" })),
        panel("Deadline lateness, completed in the last hour",
          hbars([
            { name: "p50", value: late.p50 }, { name: "p90", value: late.p90 },
            { name: "p99", value: late.p99 }, { name: "max", value: late.max },
          ], { label: "Deadline lateness percentiles, last hour", testid: "chart-lateness" }),
          h("p", { class: "muted" }, `How long after its ends_at each deadline was settled. All time: p50 ${overall.p50 ?? "–"} ms, p99 ${overall.p99 ?? "–"} ms, max ${overall.max ?? "–"} ms over ${plural(overall.completed, "deadline")}.`)),
      ),
      h("p", { class: "muted small" }, `Operations: ${Object.entries(stats.operations.by_state).map(([k, v]) => `${k} ${count(v)}`).join(" · ")}`),
    );
  }

  const view = {
    element,
    title: "Overview",
    async refresh() {
      draw(await ops.overview());
    },
  };
  refresh = () => view.refresh().catch(() => {});
  return view;
}
