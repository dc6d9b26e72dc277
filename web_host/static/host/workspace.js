// The workspace: the foreground MiniApp in a sandboxed iframe (never allow-same-origin), or nothing
// when Interact is in the foreground. Each app has its own Close button inside; the bar has none.

const NAMES = { pomodoro: "Pomodoro", whiteboard: "Whiteboard" };

export class WorkspaceView {
  constructor(root, { api, bridge }) {
    this.root = root;
    this.api = api;
    this.bridge = bridge;
    this.stage = root.querySelector('[data-testid="stage"]');
    this.idle = root.querySelector('[data-testid="idle"]');
    this.label = root.querySelector('[data-testid="foreground"]');
    this.back = root.querySelector('[data-testid="back-to-interact"]');
    this.openWhiteboard = root.querySelector('[data-testid="open-whiteboard"]');
    this.hint = root.querySelector('[data-testid="leave-hint"]');
    this.current = null; // {instanceId, scope, iframe}
    this.generation = 0;
  }

  get foregroundInstanceId() {
    return this.current ? this.current.instanceId : null;
  }

  // Show what the workspace says is in the foreground; keeps a running iframe for the same instance.
  async show(workspace) {
    const foreground = workspace.foreground;
    const focusing = workspace.focusing_operation;
    const isApp = foreground !== "interact" && foreground !== null && typeof foreground === "object";
    this.label.textContent = isApp ? NAMES[foreground.app_scope] || foreground.app_scope : "Interact";
    this.back.hidden = !isApp;
    this.openWhiteboard.hidden = isApp && foreground.app_scope === "whiteboard";
    this.hint.hidden = !focusing;
    if (!isApp) return this.clear();
    if (this.current && this.current.instanceId === foreground.instance_id) return;
    this.clear();
    const generation = this.generation;
    const { capability } = await this.api.capability(foreground.instance_id);
    if (generation !== this.generation) return; // something else came to the foreground meanwhile
    const iframe = document.createElement("iframe");
    iframe.setAttribute("sandbox", "allow-scripts");
    iframe.setAttribute("referrerpolicy", "no-referrer");
    iframe.dataset.appScope = foreground.app_scope;
    iframe.dataset.instanceId = foreground.instance_id;
    iframe.title = NAMES[foreground.app_scope] || foreground.app_scope;
    iframe.src = `/apps/${encodeURIComponent(foreground.app_scope)}/`;
    this.idle.hidden = true;
    this.stage.append(iframe);
    // Attached before the app's scripts can run: its first request already finds the Bridge ready.
    this.bridge.attach(iframe, { instanceId: foreground.instance_id, capability });
    this.current = { instanceId: foreground.instance_id, scope: foreground.app_scope, iframe };
  }

  clear() {
    this.generation += 1;
    if (!this.current) return;
    this.bridge.detach();
    this.current.iframe.remove();
    this.current = null;
    this.idle.hidden = false;
  }
}
