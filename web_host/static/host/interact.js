// The Interact panel: the main conversation, Tool results as they land, pending interactions.
// Everything is rendered with textContent: nothing from the wire is ever parsed as HTML.

const REASONS = {
  deadline_reached: "the time was up",
  agent_interrupt: "the Agent stopped it",
  user_left_workspace: "you left the workspace",
  app_closed: "the app was closed",
};
const STATES = {
  focusing: "Focus period started",
  completed: "Focus period completed",
  interrupted: "Focus period interrupted",
  cancelled: "Focus period cancelled",
};

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// RFC 3339 with microseconds; Date.parse is only specified for milliseconds.
export function millis(iso) {
  const time = Date.parse(String(iso || "").replace(/(\.\d{3})\d+/, "$1"));
  return Number.isNaN(time) ? null : time;
}

function clock(iso) {
  const time = millis(iso);
  return time === null ? "" : new Date(time).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

export function minutes(seconds) {
  if (seconds < 60) return `${seconds} s`;
  const whole = Math.floor(seconds / 60);
  const rest = seconds % 60;
  return rest ? `${whole} min ${rest} s` : `${whole} min`;
}

// One line about a Pomodoro operation, from a projection event or a history context.
export function describeOperation(op) {
  const result = op.result || {};
  const activity = op.activity ?? result.activity;
  const planned = result.duration_seconds ?? Math.round((millis(op.ends_at) - millis(op.started_at)) / 1000);
  let text = STATES[op.state] || `Focus period ${op.state}`;
  if (op.state !== "focusing" && REASONS[op.reason]) text += ` (${REASONS[op.reason]})`;
  let amount = Number.isFinite(planned) ? minutes(planned) : "";
  if (amount && op.state !== "focusing" && op.state !== "completed") {
    amount = typeof result.focused_seconds === "number" ? `${minutes(result.focused_seconds)} of ${amount}` : `${amount} planned`;
  }
  const tail = [amount, activity ? `on ${activity}` : ""].filter(Boolean).join(" ");
  return tail ? `${text}: ${tail}.` : `${text}.`;
}

export class InteractPanel {
  constructor(root, { onAnswer }) {
    this.root = root;
    this.timeline = root.querySelector('[data-testid="timeline"]');
    this.pending = root.querySelector('[data-testid="pending-interactions"]');
    this.notice = root.querySelector('[data-testid="notice"]');
    this.onAnswer = onAnswer;
    this.seen = new Set();
  }

  setForeground(isForeground) {
    this.root.dataset.foreground = String(isForeground);
  }

  showNotice(text) {
    this.notice.textContent = text || "";
    this.notice.hidden = !text;
  }

  // Keeps the timeline in time order, whatever order the items arrive in.
  append(key, node, at) {
    if (this.seen.has(key)) return;
    this.seen.add(key);
    node.dataset.at = String(at ?? Date.now());
    const later = [...this.timeline.children].find((item) => Number(item.dataset.at) > Number(node.dataset.at));
    this.timeline.insertBefore(node, later || null);
    node.scrollIntoView({ block: "nearest" });
  }

  addMessage(message) {
    if (message.sub_session_id) return; // the main conversation only
    const item = element("li", `message ${message.role}`);
    item.dataset.testid = "message";
    item.dataset.role = message.role;
    item.append(
      element("span", "who", message.role === "agent" ? "Agent" : "You"),
      element("span", "text", message.text),
      element("time", "at", clock(message.created_at)),
    );
    this.append(`message:${message.message_id}`, item, millis(message.created_at));
  }

  addOperation(op) {
    if (op.tool !== "pomodoro.start") return;
    const item = element("li", `tool ${op.state}`);
    item.dataset.testid = op.state === "focusing" ? "tool-event" : "tool-result";
    item.dataset.state = op.state;
    item.dataset.operationId = op.operation_id;
    const at = op.finalized_at || op.started_at;
    item.append(
      element("span", "who", "Tool"),
      element("span", "text", describeOperation(op)),
      element("time", "at", clock(at)),
    );
    this.append(`operation:${op.operation_id}:${op.state}`, item, millis(at));
  }

  addHistory(op) {
    const item = element("li", `tool history ${op.state}`);
    item.dataset.testid = "tool-history";
    item.dataset.state = op.state;
    item.append(
      element("span", "who", "Earlier"),
      element("span", "text", describeOperation(op)),
      element("time", "at", clock(op.started_at)),
    );
    const at = millis(op.state === "completed" ? op.ends_at : op.started_at);
    // A live result for the same operation, if one landed first, says the same thing.
    this.append(`operation:${op.operation_id}:${op.state}`, item, at);
  }

  renderPending(interactions) {
    const cards = interactions.map((interaction) => {
      const card = element("div", "interaction");
      card.dataset.testid = "interaction";
      card.dataset.toolCallId = interaction.tool_call_id;
      card.append(element("p", "prompt", interaction.prompt));
      const answer = (text) => this.onAnswer(interaction.tool_call_id, text);
      if (interaction.choices.length) {
        for (const choice of interaction.choices) {
          const button = element("button", "choice", choice);
          button.type = "button";
          button.dataset.testid = "answer";
          button.addEventListener("click", () => answer(choice));
          card.append(button);
        }
      } else {
        const form = element("form", "free-answer");
        const input = element("input");
        input.required = true;
        input.maxLength = 2000;
        input.dataset.testid = "answer-input";
        const button = element("button", "", "Answer");
        button.dataset.testid = "answer";
        form.append(input, button);
        form.addEventListener("submit", (event) => {
          event.preventDefault();
          answer(input.value);
        });
        card.append(form);
      }
      return card;
    });
    this.pending.replaceChildren(...cards);
  }
}
