// The Interact panel: the main conversation, Tool results as they land, pending interactions.
// Everything is rendered with textContent: nothing from the wire is ever parsed as HTML.
//
// The timeline is in commit order: every item the conversation's event stream carried sits at its
// event id, and the page replays that stream from its start after a load, so a reload shows the
// same rows, in the same order and the same words, as the live page did. Messages older than the
// stream keeps come from GET …/messages and go before all of them, oldest first.

const ENDINGS = {
  completed: "completed",
  "interrupted:agent_interrupt": "stopped by the Agent",
  "interrupted:person_interrupt": "stopped by you",
  "interrupted:user_left_workspace": "interrupted, you switched away",
  "cancelled:app_closed": "cancelled, you closed it",
  interrupted: "interrupted",
  cancelled: "cancelled",
};
// Closer to the end than this (in pixels), the timeline follows what lands.
const STICKY_PX = 48;

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

// The time of day in the person's own locale and time zone.
function clock(iso) {
  const time = millis(iso);
  return time === null ? "" : new Date(time).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

// "45 s", "1 min 30 s", "25 min", "1 h 5 min": as the Agent says them.
export function span(seconds) {
  const whole = Math.max(0, Math.round(seconds));
  const hours = Math.floor(whole / 3600);
  const mins = Math.floor((whole % 3600) / 60);
  const secs = whole % 60;
  const parts = [hours ? `${hours} h` : "", mins ? `${mins} min` : "", secs ? `${secs} s` : ""];
  return parts.filter(Boolean).join(" ") || "0 s";
}

// One compact line about a Pomodoro operation: what happened · how long · on what.
export function describeOperation(op) {
  const result = op.result || {};
  const activity = op.activity ?? result.activity;
  const planned = result.duration_seconds ?? Math.round((millis(op.ends_at) - millis(op.started_at)) / 1000);
  let amount = Number.isFinite(planned) ? span(planned) : "";
  let what = "started";
  if (op.state !== "focusing") {
    what = ENDINGS[`${op.state}:${op.reason}`] || ENDINGS[op.state] || op.state;
    if (op.state !== "completed" && amount && typeof result.focused_seconds === "number") {
      amount = `${span(result.focused_seconds)} of ${amount}`;
    }
  }
  return [`Pomodoro ${what}`, amount, activity].filter(Boolean).join(" · ");
}

// Where an item goes: first the messages older than the stream (`at`, milliseconds), then what the
// stream carried (`seq`, its event id: commit order), then messages just sent whose event has not
// come yet, in the order they were sent.
function rank(node) {
  if (node.dataset.seq !== undefined) return [1, Number(node.dataset.seq)];
  if (node.dataset.at !== undefined) return [0, Number(node.dataset.at)];
  return [2, 0];
}

function comesBefore(a, b) {
  const [sectionA, valueA] = rank(a);
  const [sectionB, valueB] = rank(b);
  return sectionA < sectionB || (sectionA === sectionB && valueA < valueB);
}

// The value a form field holds, as its property's type says (undefined: left empty).
function fieldValue(prop, control) {
  if (prop.type === "boolean") return control.checked;
  if (prop.type === "array") {
    return [...control.querySelectorAll("input:checked")].map((box) => box.value);
  }
  if (control.value === "") return undefined;
  if (prop.type === "number" || prop.type === "integer") return Number(control.value);
  return control.value;
}

// One property of an app's form (MCP elicitation's restricted schema) as an input.
function fieldControl(name, prop) {
  const options = prop.oneOf || prop.items?.anyOf;
  const values = prop.enum || prop.items?.enum;
  if (prop.type === "array") {
    const group = element("span", "multi");
    const chosen = new Set(prop.default || []);
    (options || values.map((value) => ({ const: value, title: value }))).forEach((option) => {
      const box = element("input");
      box.type = "checkbox";
      box.value = option.const;
      box.checked = chosen.has(option.const);
      const label = element("label", "", option.title);
      label.prepend(box);
      group.append(label);
    });
    return group;
  }
  if (options || values) {
    const select = element("select");
    if (!values?.includes(prop.default) && !options?.some((o) => o.const === prop.default)) {
      select.append(element("option", "", ""));
    }
    (options || values.map((value, i) => ({ const: value, title: prop.enumNames?.[i] ?? value }))).forEach(
      (option) => {
        const item = element("option", "", option.title);
        item.value = option.const;
        item.selected = option.const === prop.default;
        select.append(item);
      },
    );
    return select;
  }
  const input = element("input");
  input.name = name;
  if (prop.type === "boolean") {
    input.type = "checkbox";
    input.checked = prop.default === true;
    return input;
  }
  if (prop.type === "number" || prop.type === "integer") {
    input.type = "number";
    input.step = prop.type === "integer" ? "1" : "any";
    if (prop.minimum !== undefined) input.min = String(prop.minimum);
    if (prop.maximum !== undefined) input.max = String(prop.maximum);
  } else {
    input.type = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" }[prop.format] || "text";
    if (prop.minLength !== undefined) input.minLength = prop.minLength;
    if (prop.maxLength !== undefined) input.maxLength = prop.maxLength;
  }
  if (prop.default !== undefined) input.value = String(prop.default);
  return input;
}

// An app's form not yet answered: its fields, and one button that answers it.
function formCard(key, form, onSubmit) {
  const schema = form.requestedSchema;
  const required = new Set(schema.required || []);
  const node = element("form", "app-form");
  node.dataset.testid = "app-form";
  node.dataset.form = key;
  node.append(element("p", "message", form.message));
  const fields = Object.entries(schema.properties).map(([name, prop]) => {
    const control = fieldControl(name, prop);
    control.dataset.testid = "form-field";
    control.dataset.field = name;
    if (required.has(name) && "required" in control && prop.type !== "boolean") control.required = true;
    const label = element("label", "field", prop.title || name);
    label.append(control);
    node.append(label);
    return [name, prop, control];
  });
  const button = element("button", "", "Answer");
  button.dataset.testid = "answer";
  node.append(button);
  node.addEventListener("submit", (event) => {
    event.preventDefault();
    const content = {};
    for (const [name, prop, control] of fields) {
      const value = fieldValue(prop, control);
      if (value !== undefined) content[name] = value;
    }
    onSubmit({ [key]: content });
  });
  return node;
}

export class InteractPanel {
  constructor(root, { onAnswer, onAnswerForms }) {
    this.root = root;
    this.timeline = root.querySelector('[data-testid="timeline"]');
    this.pending = root.querySelector('[data-testid="pending-interactions"]');
    this.notice = root.querySelector('[data-testid="notice"]');
    this.onAnswer = onAnswer;
    this.onAnswerForms = onAnswerForms;
    this.items = new Map(); // key -> node
  }

  setForeground(isForeground) {
    this.root.dataset.foreground = String(isForeground);
  }

  showNotice(text) {
    this.notice.textContent = text || "";
    this.notice.hidden = !text;
  }

  atEnd() {
    const { scrollHeight, scrollTop, clientHeight } = this.timeline;
    return scrollHeight - scrollTop - clientHeight <= STICKY_PX;
  }

  scrollToEnd() {
    this.timeline.scrollTop = this.timeline.scrollHeight;
  }

  // Puts `node` in its place (`order`: {seq}, {at} or nothing); an item seen before moves only
  // when the stream gives it its place.
  place(key, node, order) {
    const known = this.items.get(key);
    if (known) {
      if (order.seq === undefined || known.dataset.seq !== undefined) return;
      node = known;
    }
    const following = this.atEnd();
    if (order.seq !== undefined) {
      node.dataset.seq = String(order.seq);
      delete node.dataset.at;
    } else if (order.at !== undefined) {
      node.dataset.at = String(order.at ?? 0);
    }
    this.items.set(key, node);
    const later = [...this.timeline.children].find((item) => item !== node && comesBefore(node, item));
    this.timeline.insertBefore(node, later || null);
    if (following) this.scrollToEnd();
  }

  // A message of the main conversation. `order`: {seq} when the stream carried it, {at} when it
  // came from GET …/messages, nothing when the person just sent it.
  addMessage(message, order = {}) {
    if (message.sub_session_id) return; // the main conversation only
    const item = element("li", `message ${message.role}`);
    item.dataset.testid = "message";
    item.dataset.role = message.role;
    item.append(
      element("span", "who", message.role === "agent" ? "Agent" : "You"),
      element("span", "text", message.text),
      element("time", "at", clock(message.created_at)),
    );
    this.place(`message:${message.message_id}`, item, order);
  }

  // A Pomodoro operation's start or end, as its event carried it.
  addOperation(op, seq) {
    if (op.tool !== "pomodoro.start") return;
    const item = element("li", `tool ${op.state}`);
    item.dataset.testid = op.state === "focusing" ? "tool-event" : "tool-result";
    item.dataset.state = op.state;
    item.dataset.operationId = op.operation_id;
    item.append(
      element("span", "who", "Tool"),
      element("span", "text", describeOperation(op)),
      element("time", "at", clock(op.finalized_at || op.started_at)),
    );
    this.place(`operation:${op.operation_id}:${op.state}`, item, { seq });
  }

  renderPending(interactions) {
    const cards = interactions.map((interaction) => {
      const card = element("div", "interaction");
      card.dataset.testid = "interaction";
      card.dataset.toolCallId = interaction.tool_call_id;
      card.append(element("p", "prompt", interaction.prompt));
      const answer = (text) => this.onAnswer(interaction.tool_call_id, text);
      if (interaction.forms) {
        // An app's forms of its own: each not yet answered, answered on its own.
        for (const [key, form] of Object.entries(interaction.forms)) {
          if (key in (interaction.answers || {})) continue;
          card.append(formCard(key, form, (answers) => this.onAnswerForms(interaction.tool_call_id, answers)));
        }
      } else if (interaction.choices.length) {
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
