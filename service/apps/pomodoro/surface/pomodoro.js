// The Pomodoro MiniApp: shows the focus period it exists for and counts down to its ends_at.
//
// The countdown is always derived from the operation's absolute ends_at and the server clock
// offset, never from a stored remaining time, so a reload counts on from the same deadline. The
// app decides nothing: at ends_at the Runtime completes the period and closes this app, and the
// host shows the result in Interact. There is no completion prompt here.
(function () {
  "use strict";

  const TICK_MS = 250;
  const NUDGE_EVERY_MS = 2000;
  const LABELS = { completed: "Completed", interrupted: "Interrupted", cancelled: "Cancelled" };
  const byTestId = (id) => document.querySelector(`[data-testid="${id}"]`);
  // RFC 3339 with microseconds; Date.parse is only specified for milliseconds.
  const millis = (iso) => Date.parse(String(iso).replace(/(\.\d{3})\d+/, "$1"));

  let operation = null;
  let offsetMs = 0;
  let instanceOpen = false;
  let lastNudge = 0;

  function format(ms) {
    const total = Math.max(0, Math.ceil(ms / 1000));
    const seconds = total % 60;
    return `${Math.floor(total / 60)}:${String(seconds).padStart(2, "0")}`;
  }

  function clock(ms) {
    return new Date(ms - offsetMs).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }

  function say(text) {
    byTestId("status").textContent = text;
  }

  function quietly(what) {
    return (error) => {
      say(`${what}: ${error && error.message}`);
      console.debug(`pomodoro: ${what}`, error && error.body);
    };
  }

  function render() {
    const timer = byTestId("timer");
    if (!operation) {
      timer.dataset.state = "empty";
      byTestId("countdown").textContent = "-:--";
      return;
    }
    timer.dataset.state = operation.state;
    // "Focus" above the activity; without one, the heading alone says it ("Focus period").
    byTestId("label").hidden = !operation.activity;
    byTestId("activity").textContent = operation.activity || "Focus period";
    if (operation.state !== "focusing") {
      byTestId("countdown").textContent = operation.state === "completed" ? "0:00" : "-:--";
      say(LABELS[operation.state] || operation.state);
      return;
    }
    const endsAt = millis(operation.ends_at);
    const left = endsAt - (Date.now() + offsetMs);
    byTestId("countdown").textContent = format(left);
    if (left > 0) {
      say(`Focusing until ${clock(endsAt)}`);
    } else if (Date.now() - lastNudge > NUDGE_EVERY_MS) {
      // Reading the context of an overdue period settles it at once, should the sweeper be late.
      lastNudge = Date.now();
      loadContext().catch(quietly("Could not reach the host"));
    }
  }

  async function loadContext() {
    const sent = Date.now();
    const context = await window.lineup.context();
    const received = Date.now();
    // The server read its clock between our send and our receipt: take the midpoint.
    offsetMs = millis(context.server_time) - (sent + received) / 2;
    operation = context.operation;
    instanceOpen = context.status === "open";
    byTestId("close").disabled = !instanceOpen;
    render();
    return context;
  }

  function sameSnapshot(a, b) {
    const keys = Object.keys(b);
    return Object.keys(a).length === keys.length && keys.every((key) => a[key] === b[key]);
  }

  // Display data only, in the manifest's strict schema: no remaining time, no decision.
  async function saveSnapshot() {
    if (!operation || !instanceOpen) return;
    const snapshot = {
      activity: operation.activity ?? null,
      operation_id: operation.operation_id,
      started_at: operation.started_at,
      ends_at: operation.ends_at,
      display_state: operation.state,
    };
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const state = await window.lineup.state.get();
      if (state.readonly || sameSnapshot(state.data, snapshot)) return;
      try {
        await window.lineup.state.save(snapshot, state.revision);
        return;
      } catch (error) {
        // The instance closed between the read and the save (the person left, the period ended):
        // its state is read-only now and there is nothing left to save.
        if (error.error === "state_readonly") return;
        if (error.error !== "revision_conflict") throw error;
      }
    }
  }

  byTestId("close").addEventListener("click", () => {
    byTestId("close").disabled = true;
    say("Closing…");
    window.lineup.navigation.close().catch((error) => {
      byTestId("close").disabled = !instanceOpen;
      quietly("Could not close")(error);
    });
  });

  // An MCP Apps host's SDK asks for a re-read (the Web Host's never does: its host reloads the app).
  document.addEventListener("lineup:refresh", () => {
    loadContext().catch(quietly("Could not reach the host"));
  });

  loadContext()
    .then(saveSnapshot)
    .catch(quietly("Could not load"));
  setInterval(render, TICK_MS);
})();
