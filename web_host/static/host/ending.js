// The ending of a focus period as Interact presents it (the Pomodoro only shows its countdown and
// closes): while the page is open the tab's title counts down and then says the period ended, a
// polite live region announces starts and endings to a screen reader, and — only after the person
// turned it on — a browser notification says so while the page is in the background.
//
// The page's own clock (corrected by the server's) marks the end of the period at `ends_at`; the
// Runtime's result, when its event comes, says how it ended. What the stream replays after a load
// is history, not news: only what happened since the page opened (give or take HISTORY_MARGIN_MS)
// is announced.

import { describeOperation, millis } from "./interact.js";

const BASE_TITLE = document.title;
const HISTORY_MARGIN_MS = 1_000;
const OPT_IN_KEY = "lineup.notify-endings";

function clockText(ms) {
  const seconds = Math.max(0, Math.ceil(ms / 1000));
  return `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
}

export class PeriodWatch {
  constructor({ announcer, toggle, onNotice }) {
    this.announcer = announcer;
    this.toggle = toggle;
    this.onNotice = onNotice;
    this.offsetMs = 0; // server clock minus this page's clock
    this.current = null; // {id, endsAt (page clock), activity, ended}
    this.timer = null;
    this.said = new Set(); // `${operation_id}:${what}` already announced
    this.openedAt = Date.now();
    this.setUpToggle();
  }

  // ---- notifications, opt-in only ------------------------------------------------------------

  get notifying() {
    return (
      "Notification" in window &&
      window.Notification.permission === "granted" &&
      window.localStorage.getItem(OPT_IN_KEY) === "on"
    );
  }

  setUpToggle() {
    if (!this.toggle) return;
    if (!("Notification" in window)) {
      this.toggle.hidden = true;
      return;
    }
    this.toggle.hidden = false;
    this.showToggle();
    this.toggle.addEventListener("click", () => this.flip());
  }

  showToggle() {
    const on = this.notifying;
    this.toggle.setAttribute("aria-pressed", String(on));
    this.toggle.textContent = on ? "Notifications on" : "Notify me when it ends";
  }

  async flip() {
    if (this.notifying) {
      window.localStorage.setItem(OPT_IN_KEY, "off");
      this.showToggle();
      return;
    }
    let permission = window.Notification.permission;
    if (permission === "default") permission = await window.Notification.requestPermission();
    if (permission === "granted") {
      window.localStorage.setItem(OPT_IN_KEY, "on");
    } else {
      this.onNotice("Notifications are blocked for this site in the browser's settings.");
    }
    this.showToggle();
  }

  notify(tag, title, body) {
    if (!this.notifying || document.visibilityState !== "hidden") return;
    try {
      new window.Notification(title, { body, tag, icon: "/host/favicon.svg" });
    } catch {
      // A browser that shows notifications only from a service worker: the title still says it.
    }
  }

  // ---- announcing --------------------------------------------------------------------------

  say(key, text) {
    if (this.said.has(key)) return false;
    this.said.add(key);
    // A fresh text node each time, so a screen reader announces a repeated sentence too.
    this.announcer.textContent = "";
    window.setTimeout(() => {
      this.announcer.textContent = text;
    }, 50);
    return true;
  }

  isNews(iso) {
    const at = millis(iso);
    return at !== null && at - this.offsetMs >= this.openedAt - HISTORY_MARGIN_MS;
  }

  // ---- the workspace's state: the running period, if any ------------------------------------

  follow(workspace, receivedAt = Date.now()) {
    const server = millis(workspace.server_time);
    if (server !== null) this.offsetMs = server - receivedAt;
    const op = workspace.focusing_operation;
    if (op && op.state === "focusing") {
      if (!this.current || this.current.id !== op.operation_id) {
        this.current = {
          id: op.operation_id,
          endsAt: millis(op.ends_at) - this.offsetMs,
          activity: op.activity || "",
          ended: false,
        };
        if (this.isNews(op.started_at)) this.say(`${op.operation_id}:start`, `${describeOperation(op)}.`);
        this.tick();
      }
      return;
    }
    if (this.current && !this.current.ended) {
      // It ended before its time (the result's event says how) or the stream is behind the page.
      this.stop();
    }
  }

  stop() {
    window.clearTimeout(this.timer);
    this.timer = null;
    if (this.current) this.current.ended = true;
  }

  tick() {
    window.clearTimeout(this.timer);
    const period = this.current;
    if (!period || period.ended) return;
    const left = period.endsAt - Date.now();
    if (left <= 0) {
      this.ended(period);
      return;
    }
    document.title = `${clockText(left)} · ${period.activity || "focus"} · ${BASE_TITLE}`;
    // Next when the shown second changes (or at the end itself).
    const untilNextSecond = left % 1000 || 1000;
    this.timer = window.setTimeout(() => this.tick(), Math.min(untilNextSecond + 5, left));
  }

  // The period reached its end: by the page's clock, or by the Runtime's result if that came first.
  ended(period) {
    if (this.current && this.current.id === period.id) this.stop();
    const what = period.activity ? `Focus period ended: ${period.activity}` : "Focus period ended";
    document.title = `Focus period ended · ${BASE_TITLE}`;
    if (this.say(`${period.id}:end`, `${what}.`)) {
      this.notify(period.id, "Focus period ended", period.activity || "Your Pomodoro is over.");
    }
  }

  // ---- the Runtime's word: an operation's event from the stream ------------------------------

  operation(op) {
    if (op.tool !== "pomodoro.start") return;
    if (op.state === "focusing") {
      if (this.isNews(op.started_at)) this.say(`${op.operation_id}:start`, `${describeOperation(op)}.`);
      return;
    }
    if (!this.isNews(op.finalized_at)) return;
    if (op.state === "completed") {
      // The same words as the page's clock says at ends_at, whichever comes first, once.
      this.ended({ id: op.operation_id, activity: op.activity ?? (op.result || {}).activity ?? "" });
      return;
    }
    if (this.current && this.current.id === op.operation_id) this.stop();
    const text = describeOperation(op);
    document.title = `${text} · ${BASE_TITLE}`;
    if (this.say(`${op.operation_id}:end`, `${text}.`)) this.notify(op.operation_id, "Focus period stopped", text);
  }

  // Back in the foreground after the end: the title returns to the page's own.
  seen() {
    if (document.visibilityState === "visible" && (!this.current || this.current.ended)) {
      window.setTimeout(() => {
        if (!this.current || this.current.ended) document.title = BASE_TITLE;
      }, 10_000);
    }
  }
}
