// Delivery control on the overview: the pause and the circuit with a pause/resume button (each
// confirmed), what retention keeps, and the recovery of dead rows by filter with a dry run. The
// forms are built once and kept across refreshes; only the state they show is redrawn.
import { ApiError, ops } from "./api.js";
import { age, count, h, notice, replace, timeEl, when } from "./dom.js";

function failure(error) {
  return error instanceof ApiError ? error.message : String(error);
}

function secondsSince(iso, now) {
  return iso ? Math.max(0, (new Date(now) - new Date(iso)) / 1000) : null;
}

/** The pause and the circuit, and the button that pauses or resumes. */
export function deliveryPanel(onChange) {
  const state = h("div", { class: "delivery-state", "data-testid": "delivery-state" });
  const reason = h("input", { name: "reason", maxlength: 500, placeholder: "reason (optional)", "aria-label": "Reason for the pause" });
  const message = h("div", { class: "messages" });
  const pause = h("button", { type: "button", class: "danger", "data-testid": "pause" }, "Pause delivery");
  const resume = h("button", { type: "button", "data-testid": "resume" }, "Resume delivery");
  const pauseForm = h("div", { class: "filters inline" }, reason, pause);
  const element = h("section", { class: "panel delivery", "data-testid": "delivery" },
    h("h2", {}, "Delivery"), state, pauseForm, resume, message);

  async function act(button, label, call, done) {
    button.disabled = true;
    try {
      const answered = await call();
      replace(message, notice(done(answered), "ok"));
      update(answered);
      onChange();
    } catch (error) {
      replace(message, notice(`Could not ${label}: ${failure(error)}`));
    } finally {
      button.disabled = false;
    }
  }

  pause.addEventListener("click", () => {
    const why = reason.value.trim();
    const ok = window.confirm(
      `Pause delivery to the Agent${why ? ` (${why})` : ""}?\n\nEvery relay stops sending within a second. Results wait, spending no attempts, until you resume.`,
    );
    if (!ok) return;
    act(pause, "pause", () => ops.pause(why || undefined), (s) => `Paused at ${when(s.paused_at)}.`);
  });
  resume.addEventListener("click", () => {
    if (!window.confirm("Resume delivery?\n\nThe relays are woken and the waiting results go at once.")) return;
    act(resume, "resume", () => ops.resume(), () => "Resumed: the relays are sending.");
  });

  function update(delivery, now = new Date().toISOString()) {
    const paused = delivery.paused;
    element.dataset.paused = String(paused);
    element.dataset.circuit = delivery.circuit;
    const lines = [];
    if (paused) {
      lines.push(h("p", { class: "notice warn", "data-testid": "paused" },
        h("strong", {}, "Paused"), ` for ${age(secondsSince(delivery.paused_at, now))} by ${delivery.paused_by}`,
        delivery.reason ? ` — ${delivery.reason}` : "", ". Results wait, spending no attempts."));
    } else {
      lines.push(h("p", { class: "notice ok", "data-testid": "running" }, h("strong", {}, "Running"), ": the relays deliver as results come."));
    }
    if (delivery.circuit === "closed") {
      lines.push(h("p", { class: "muted", "data-testid": "circuit" }, "Circuit closed since ", timeEl(delivery.circuit_since),
        delivery.last_probe_at ? [" (last probe ", timeEl(delivery.last_probe_at), ")"] : "", "."));
    } else {
      lines.push(h("p", { class: "notice error", "data-testid": "circuit" },
        h("strong", {}, delivery.circuit === "open" ? "Circuit open" : "Circuit half open (a probe is in flight)"),
        ` for ${age(secondsSince(delivery.circuit_since, now))}: the Agent's endpoint fails as a whole (${delivery.last_error || "no answer"}). `,
        "Only a probe is sent now and then; the next ", timeEl(delivery.next_probe_at), "."));
    }
    replace(state, lines);
    pauseForm.hidden = paused;
    resume.hidden = !paused;
  }

  return { element, update };
}

/** What retention keeps and the oldest rows it will remove. */
export function retentionPanel() {
  const body = h("div", { "data-testid": "retention" });
  const element = h("section", { class: "panel" }, h("h2", {}, "Retention"), body);

  function update(retention, now = new Date().toISOString(), history = null) {
    const oldest = (iso) => (iso ? [timeEl(iso), ` (${age(secondsSince(iso, now))} ago)`] : "none");
    const kept = !history ? [] : [
      history.retention_days === null
        ? h("p", { class: "muted", "data-testid": "history-retention" }, "History is not pruned yet: the period shows once a service has pruned (HISTORY_RETENTION_DAYS).")
        : h("p", { "data-testid": "history-retention" }, `History (operations, instances, messages, answers) is kept ${history.retention_days} days; last pruned `,
          timeEl(history.last_pruned_at), ` by ${history.reported_by}, ${count(history.total_pruned)} row(s) removed in all.`),
      h("dl", { class: "fields" },
        h("dt", {}, "Oldest operation"), h("dd", { "data-testid": "oldest-operation" }, oldest(history.oldest_operation_at)),
        h("dt", {}, "Oldest recorded answer"), h("dd", { "data-testid": "oldest-answer" }, oldest(history.oldest_answer_at)),
        h("dt", {}, "Oldest message"), h("dd", { "data-testid": "oldest-message" }, oldest(history.oldest_message_at))),
    ];
    replace(body,
      retention.delivered_days === null
        ? h("p", { class: "muted" }, "No relay has pruned yet: the settings show once one has (RELAY_RETENTION_DAYS, RELAY_DEAD_RETENTION_DAYS).")
        : h("p", {}, `Delivered rows are kept ${retention.delivered_days} days, dead rows `,
          retention.dead_days === 0 ? "for good" : `${retention.dead_days} days`,
          `; reported by ${retention.reported_by} `, timeEl(retention.reported_at),
          `, last pruned ${count(retention.last_pruned_rows)} row(s).`),
      h("dl", { class: "fields" },
        h("dt", {}, "Oldest delivered row"), h("dd", { "data-testid": "oldest-delivered" }, oldest(retention.oldest_delivered_at)),
        h("dt", {}, "Oldest dead row"), h("dd", { "data-testid": "oldest-dead" }, oldest(retention.oldest_dead_at))),
      ...kept);
  }

  return { element, update };
}

// Dates are entered in UTC, as every time in the console is shown: `2026-12-01 14:03` (seconds
// optional; a "T" works too). Anything else is refused before the request, saying the form.
const UTC_INPUT = /^(\d{4})-(\d\d)-(\d\d)(?:[ T](\d\d):(\d\d)(?::(\d\d))?)?$/;

export function utcInstant(text) {
  const value = text.trim().replace(/\s*UTC$/i, "").replace(/Z$/, "");
  if (!value) return undefined;
  const found = UTC_INPUT.exec(value);
  if (!found) throw new RangeError(`"${text}" is not a UTC time like 2026-12-01 14:03`);
  const [, y, mo, d, hh = "00", mm = "00", ss = "00"] = found;
  const at = new Date(Date.UTC(+y, +mo - 1, +d, +hh, +mm, +ss));
  if (at.getUTCMonth() !== +mo - 1 || at.getUTCDate() !== +d || +hh > 23 || +mm > 59 || +ss > 59) {
    throw new RangeError(`"${text}" is not a UTC time like 2026-12-01 14:03`);
  }
  return at.toISOString();
}

/** Dead rows back to the queue by filter: a dry run first, then the requeue, confirmed. */
export function recoverPanel(onChange) {
  const field = (label, input) => h("label", {}, label, input);
  const utcField = (name) => h("input", {
    name, inputmode: "numeric", autocomplete: "off", placeholder: "YYYY-MM-DD HH:MM", maxlength: 25,
    pattern: "\\d{4}-\\d\\d-\\d\\d([ T]\\d\\d:\\d\\d(:\\d\\d)?)?( ?UTC|Z)?",
    title: "A time in UTC, like 2026-12-01 14:03",
  });
  const since = utcField("since");
  const until = utcField("until");
  const conversation = h("input", { name: "conversation_id", maxlength: 255, placeholder: "conversation_id" });
  const tool = h("input", { name: "tool", maxlength: 255, placeholder: "a tool name" });
  const lastError = h("input", { name: "last_error_prefix", maxlength: 500, placeholder: "e.g. HTTP 503" });
  const dryRun = h("button", { type: "button", "data-testid": "recover-dry-run" }, "Dry run");
  const requeue = h("button", { type: "button", class: "danger", "data-testid": "recover" }, "Requeue matching dead rows");
  const result = h("div", { class: "messages", "data-testid": "recover-result" });
  const element = h("section", { class: "panel", "data-testid": "recover-panel" },
    h("h2", {}, "Recover dead rows"),
    h("p", { class: "muted small" }, "Dead rows matching every filter given (none: all of them) go back to pending as a requeue puts them: the same event_id, attempts 0, due now, in each conversation's order."),
    h("div", { class: "filters" },
      field("Created since (UTC)", since), field("Created before (UTC)", until), field("Conversation", conversation),
      field("Tool", tool), field("Last error begins with", lastError), dryRun, requeue),
    result);

  function filters() {
    const trimmed = (input) => input.value.trim() || undefined;
    return {
      since: utcInstant(since.value), until: utcInstant(until.value), conversation_id: trimmed(conversation),
      tool: trimmed(tool), last_error_prefix: trimmed(lastError),
    };
  }

  async function run(button, makeBody) {
    let body;
    try {
      body = makeBody();
    } catch (error) {
      replace(result, notice(`Could not recover: ${error.message}.`));
      return null;
    }
    button.disabled = true;
    try {
      return await ops.recover(body);
    } catch (error) {
      replace(result, notice(`Could not recover: ${failure(error)}`));
      return null;
    } finally {
      button.disabled = false;
    }
  }

  dryRun.addEventListener("click", async () => {
    const answer = await run(dryRun, () => ({ ...filters(), dry_run: true }));
    if (answer) replace(result, notice(`${count(answer.matched)} dead row(s) match. Nothing was changed (dry run).`, "info"));
  });
  requeue.addEventListener("click", async () => {
    const counted = await run(requeue, () => ({ ...filters(), dry_run: true }));
    if (!counted) return;
    if (!counted.matched) {
      replace(result, notice("No dead row matches: nothing to requeue.", "info"));
      return;
    }
    if (!window.confirm(`Requeue ${counted.matched} dead row(s)?\n\nEach goes back to pending with 0 attempts and the same event_id; the relays deliver them again.`)) return;
    const answer = await run(requeue, filters);
    if (answer) {
      replace(result, notice(`Requeued ${count(answer.requeued)} of ${count(answer.matched)} matching dead row(s).`, "ok"));
      onChange();
    }
  });

  return { element };
}
