// The host side of an MCP App as hosts build it, on the official AppBridge and
// PostMessageTransport of @modelcontextprotocol/ext-apps; bundled by the preview test for the
// host page and driven from it through window.previewHost. Two layouts:
// - web: the view in a sandbox proxy on another origin (sandbox.js), with the CSP built from the
//   resource's _meta.ui.csp as the proxy's header;
// - desktop: the view in a sandboxed srcdoc frame, with that CSP as a meta tag in its head.
import { AppBridge, PostMessageTransport } from '@modelcontextprotocol/ext-apps/app-bridge';
import { z } from 'zod';

import { cspFor } from './csp.mjs';

const HOST = { name: 'cardwriter e2e host', version: '1.0.0' };
// TIMEOUT bounds a request the view never answers (the SDK's default is 60 s).
const TIMEOUT = 10000;
const views = new Map();
let next = 1;

function view(id) {
  const v = views.get(id);
  if (!v) throw new Error(`no view ${id}`);
  return v;
}

// settle turns a request's outcome into data the test can read.
async function settle(p) {
  try {
    return { ok: true, result: await p };
  } catch (err) {
    return { ok: false, code: err?.code, message: String(err?.message ?? err) };
  }
}

window.previewHost = {
  /** Starts a view of html in a new frame of the layout; resolves once it is initialized. */
  async mount({ layout, html, csp, sandboxUrl, hostContext }) {
    const id = next++;
    const frame = document.createElement('iframe');
    frame.id = `view-${id}`;
    frame.style.cssText = 'display: block; width: 480px; height: 160px; border: 1px solid #999; margin: 8px;';
    const v = { id, frame, ctx: { ...hostContext }, sizes: [], initialized: false };
    const bridge = new AppBridge(null, HOST, { openLinks: {}, logging: {} }, { hostContext: v.ctx });
    v.bridge = bridge;
    // As a host does: the frame takes the height the view reports.
    bridge.onsizechange = ({ width, height }) => {
      v.sizes.push({ width, height });
      if (height !== undefined) frame.style.height = `${height}px`;
    };
    bridge.onrequestdisplaymode = async ({ mode }) => {
      v.ctx = { ...v.ctx, displayMode: mode };
      bridge.setHostContext(v.ctx);
      return { mode };
    };
    const initialized = new Promise((resolve) => {
      bridge.oninitialized = () => {
        v.initialized = true;
        resolve();
      };
    });
    views.set(id, v);
    if (layout === 'web') {
      frame.setAttribute('sandbox', 'allow-scripts allow-same-origin allow-forms');
      const ready = new Promise((resolve) => {
        const listener = (ev) => {
          if (ev.source === frame.contentWindow && ev.data?.method === 'ui/notifications/sandbox-proxy-ready') {
            window.removeEventListener('message', listener);
            resolve();
          }
        };
        window.addEventListener('message', listener);
      });
      document.body.appendChild(frame);
      frame.src = `${sandboxUrl}?csp=${encodeURIComponent(JSON.stringify(csp ?? null))}`;
      await ready;
      await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
      await bridge.sendSandboxResourceReady({ html, csp });
    } else {
      frame.setAttribute('sandbox', 'allow-scripts');
      document.body.appendChild(frame);
      await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
      const meta = `<meta http-equiv="Content-Security-Policy" content="${cspFor(csp ?? undefined)}">`;
      frame.srcdoc = /<head[^>]*>/i.test(html) ? html.replace(/<head[^>]*>/i, (h) => h + meta) : meta + html;
    }
    await initialized;
    return id;
  },

  /** What the view said of itself in ui/initialize. */
  app(id) {
    const { bridge, initialized } = view(id);
    return { initialized, info: bridge.getAppVersion(), capabilities: bridge.getAppCapabilities() };
  },

  toolInput(id, args) { return view(id).bridge.sendToolInput({ arguments: args }); },
  toolResult(id, result) { return view(id).bridge.sendToolResult(result); },
  sizes(id) { return view(id).sizes; },
  frameHeight(id) { return view(id).frame.getBoundingClientRect().height; },

  /** Changes the host context (only what changed is sent, as hosts do). */
  context(id, patch) {
    const v = view(id);
    v.ctx = { ...v.ctx, ...patch };
    v.bridge.setHostContext(v.ctx);
  },

  ping(id) { return settle(view(id).bridge.request({ method: 'ping' }, { timeout: TIMEOUT })); },

  /** A request the view has no handler for. */
  unknown(id) {
    return settle(view(id).bridge.request({ method: 'cardwriter/no-such-method', params: {} }, z.object({}).passthrough(), { timeout: TIMEOUT }));
  },

  /** ui/resource-teardown, then (as hosts do once it is answered) the frame removed. */
  async teardown(id) {
    const v = view(id);
    const out = await settle(v.bridge.teardownResource({}, { timeout: TIMEOUT }));
    await v.bridge.close();
    v.frame.remove();
    views.delete(id);
    return out;
  },
};
