// The card preview (ui://cardwriter/card-preview) as hosts run it: under the official MCP Apps
// host bridge (AppBridge and PostMessageTransport of @modelcontextprotocol/ext-apps) in headless
// Chromium, as a web host runs it (a sandbox proxy on another origin, the CSP from the resource's
// _meta.ui.csp) and as a desktop host does (a sandboxed srcdoc frame), with get_card and
// review_card results from the built binary over the TypeScript SDK client, against the sandbox.
// Screenshots go to CARDWRITER_ARTIFACTS (CI: ci-artifacts/), else to a temporary directory.
// Also: the page's script is what tools/preview/src builds, byte for byte.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { PNG_1x1, assertSuccess, callTool, connect, serverFor } from './lib/harness.mjs';
import { findChromium, startAppHost, viewFrame } from './lib/apphost.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const PREVIEW = 'ui://cardwriter/card-preview';
const KEY = 'io.cardwriter/preview';
const FIRST = 'The Kestrel docks. <script>window.pwned=1</script><img src=x onerror="window.pwned=2">';
// The alternate is much longer than the first message: the view must grow its frame for it.
const ALTERNATE = ['A quiet night at the harbor.', '', 'The lamps along the pier burn low, and the water slaps against the hulls.',
  'Somewhere a bell rings twice.', '', 'Nobody is watching the gate tonight.', '', 'You have until dawn.'].join('\n');

describe('the page script', () => {
  it('is what tools/preview/src builds (node build.mjs --check)', async () => {
    const src = join(root, 'tools', 'preview', 'src');
    assert.ok(existsSync(join(src, 'node_modules')), 'tools/preview/src has no node_modules: run `npm ci` there (e2e/run does)');
    const { stdout } = await promisify(execFile)(process.execPath, ['build.mjs', '--check'], { cwd: src });
    assert.match(stdout, /as built/);
  });
});

const chromium = findChromium();
if (!chromium && process.env.CI === 'true') {
  throw new Error('chromium is not installed: the card preview tests need Debian\'s chromium (.ci/run installs it)');
}

describe('the card preview under the official MCP Apps host bridge', { skip: chromium ? false : 'chromium is not installed (apt-get install chromium)' }, () => {
  let server;
  let client;
  let host;
  let resource;
  let getCard;
  let review;
  let missing;
  let artifacts;

  before(async () => {
    artifacts = process.env.CARDWRITER_ARTIFACTS || mkdtempSync(join(tmpdir(), 'card-preview-'));
    mkdirSync(artifacts, { recursive: true });
    server = await serverFor('stdio');
    // A host that renders MCP Apps declares the extension; only then does the server name the
    // preview in tools/list and put its data in results.
    client = await connect('v1', server, { capabilities: { extensions: { 'io.modelcontextprotocol/ui': { mimeTypes: ['text/html;profile=mcp-app'] } } } });
    const { tools } = await client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    const ok = async (name, args) => assertSuccess('v1', byName[name], await callTool('v1', client, name, args));
    const card = await ok('create_card', { roleName: 'Captain <b>Vey</b>' });
    await ok('set_opening_lines', { roleId: card.roleId, roleWelcome: FIRST, alternates: [ALTERNATE], prologue: ["Sorry I'm late, Captain."] });
    const img = await ok('upload_image', { purpose: 'avatar', roleId: card.roleId, contentType: 'image/png', dataBase64: PNG_1x1 });
    await ok('update_card_profile', { roleId: card.roleId, avatarImageId: img.imageId });
    const lore = await ok('create_worldbook', { name: 'Harbor lore' });
    await ok('write_worldbook_document', { worldbookId: lore.worldbookId, binding: { roleId: card.roleId }, entries: [
      { op: 'create', name: 'The Kestrel', content: 'A battered freighter.', keywords: ['Kestrel'] },
      { op: 'create', name: 'The harbor', content: 'Quiet at night.', keywords: ['harbor'] },
      { op: 'create', name: 'Customs', content: 'Always watching.', keywords: ['customs'] },
    ] });
    const shelf = await ok('create_worldbook', { name: 'Empty shelf' });
    await ok('write_worldbook_document', { worldbookId: shelf.worldbookId, binding: { roleId: card.roleId }, entries: [] });
    getCard = await callTool('v1', client, 'get_card', { roleId: card.roleId });
    review = await callTool('v1', client, 'review_card', { roleId: card.roleId });
    missing = await callTool('v1', client, 'get_card', { roleId: 'r_no_such_card' });
    assert.equal(missing.isError, true);
    assert.ok(getCard._meta?.[KEY] && review._meta?.[KEY], 'get_card and review_card carry the preview in _meta');
    assert.equal(byName.get_card._meta?.ui?.resourceUri, PREVIEW);
    assert.equal(byName.review_card._meta?.ui?.resourceUri, PREVIEW);
    const read = await client.readResource({ uri: PREVIEW });
    assert.equal(read.contents.length, 1);
    resource = read.contents[0];
    assert.equal(resource.mimeType, 'text/html;profile=mcp-app');
    host = await startAppHost(chromium);
  });

  after(async () => {
    await host?.stop();
    await client?.close();
    await server?.stop();
  });

  for (const layout of ['web', 'desktop']) {
    describe(layout === 'web' ? 'as a web host runs it (sandbox proxy on another origin)' : 'as a desktop host runs it (sandboxed srcdoc frame)', () => {
      let id;
      let frame;
      const call = (fn, ...args) => host.page.evaluate(fn, ...args);
      const mount = async (hostContext = { theme: 'light', displayMode: 'inline', availableDisplayModes: ['inline', 'fullscreen'] }) => {
        const v = await call((o) => window.previewHost.mount(o), { layout, html: resource.text, csp: resource._meta?.ui?.csp, sandboxUrl: host.sandboxUrl, hostContext });
        return { id: v, frame: await viewFrame(host.page, v, layout) };
      };
      const shot = (name) => host.page.screenshot({ path: join(artifacts, `card-preview-${layout}-${name}.png`), fullPage: true });
      // The text of the view's elements matching selector.
      const texts = (selector) => frame.$$eval(selector, (els) => els.map((e) => e.textContent));
      const firing = () => texts('.entry.fires .name');
      // Waits until the card fits the frame the host gave the view (nothing of it cut off); fails
      // with the content's and the frame's heights and the sizes the view reported.
      const fits = async () => {
        const fitting = () => document.getElementById('card').getBoundingClientRect().bottom <= window.innerHeight;
        try {
          await frame.waitForFunction(fitting, { timeout: 10000 });
        } catch (err) {
          const [content, viewport] = await frame.evaluate(() => [Math.ceil(document.documentElement.scrollHeight), window.innerHeight]);
          const sizes = await call((v) => window.previewHost.sizes(v), id);
          assert.fail(`the card is cut off: its content is ${content} px in a ${viewport} px frame; the view reported ${JSON.stringify(sizes)} (${err.message})`);
        }
      };

      before(() => {
        host.errors.length = 0;
      });

      it('completes the ui/initialize handshake', async () => {
        ({ id, frame } = await mount());
        const app = await call((v) => window.previewHost.app(v), id);
        assert.equal(app.initialized, true);
        assert.equal(app.info?.name, 'cardwriter card preview');
      });

      it("renders get_card's result: name, first message, alternates, prologue; no worldbook heading", async () => {
        await call((v, r) => window.previewHost.toolResult(v, r), id, getCard);
        await frame.waitForSelector('#card:not([hidden])');
        assert.deepEqual(await texts('#name'), ['Captain <b>Vey</b>']);
        assert.deepEqual(await texts('#message'), [FIRST]);
        assert.deepEqual(await texts('#picker option'), ['First message', 'Alternate 1']);
        assert.deepEqual(await texts('#prologue li'), ["Sorry I'm late, Captain."]);
        assert.equal(await frame.$eval('#worldbook-box', (e) => e.hidden), true, 'get_card lists no worldbook: no Worldbook heading');
      });

      it("renders review_card's result: avatar, worldbooks, the firing entry marked; card text shown, never run", async () => {
        await call((v, r) => window.previewHost.toolResult(v, r), id, review);
        await frame.waitForFunction(() => document.querySelectorAll('.book').length === 2);
        assert.match(await frame.$eval('#avatar img', (e) => e.src), /^data:image\/png;base64,/);
        assert.deepEqual(await texts('#name'), ['Captain <b>Vey</b>']);
        assert.deepEqual(await texts('#message'), [FIRST]);
        assert.equal(await frame.evaluate(() => String(window.pwned)), 'undefined', 'a <script> in a card must not run');
        assert.equal(await frame.$('#message script, #message img, #name b'), null, 'card text must not become markup');
        assert.deepEqual(await firing(), ['The Kestrel']);
        assert.deepEqual(await texts('.book h4'), ['Harbor lore', 'Empty shelf']);
        assert.deepEqual(await texts('.book .note'), ['No entries yet.'], 'a bound worldbook with no entries says so');
        await fits();
        await shot('review');
      });

      it('reports its size when a longer greeting is picked, so the host grows the frame', async () => {
        const before = await call((v) => window.previewHost.sizes(v), id);
        const heightBefore = await call((v) => window.previewHost.frameHeight(v), id);
        await frame.select('#picker', '1');
        assert.deepEqual(await texts('#message'), [ALTERNATE]);
        await fits();
        const after = await call((v) => window.previewHost.sizes(v), id);
        assert.ok(after.length > before.length, `no ui/notifications/size-changed after the longer greeting (sizes: ${JSON.stringify(after)})`);
        assert.ok(await call((v) => window.previewHost.frameHeight(v), id) > heightBefore, 'the frame did not grow');
        assert.deepEqual(await firing(), ['The harbor']);
        const entry = await frame.$eval('.entry.fires', (e) => e.getBoundingClientRect().bottom);
        assert.ok(entry <= await frame.evaluate(() => window.innerHeight), 'the firing entry is cut off');
        await shot('alternate');
      });

      it('answers ping', async () => {
        const out = await call((v) => window.previewHost.ping(v), id);
        assert.equal(out.ok, true, `ping: ${out.message}`);
      });

      it('answers an unknown request with method not found', async () => {
        const out = await call((v) => window.previewHost.unknown(v), id);
        assert.equal(out.ok, false);
        assert.equal(out.code, -32601, `want -32601 (method not found), got ${out.code}: ${out.message}`);
      });

      it("follows the host's theme and display mode", async () => {
        const color = () => frame.evaluate(() => getComputedStyle(document.body).color);
        const light = await color();
        await call((v) => window.previewHost.context(v, { theme: 'dark' }), id);
        await frame.waitForFunction(() => document.documentElement.dataset.theme === 'dark', { timeout: 10000 });
        const dark = await color();
        assert.notEqual(dark, light, 'the text color did not change with the theme');
        assert.equal(dark, 'rgb(245, 245, 247)');
        await shot('dark');
        await call((v) => window.previewHost.context(v, { theme: 'light', displayMode: 'fullscreen' }), id);
        await frame.waitForFunction(() => document.documentElement.dataset.theme === 'light' && document.documentElement.dataset.displayMode === 'fullscreen', { timeout: 10000 });
        assert.equal(await color(), light);
        // The host's style variables win over the view's own colors.
        await call((v) => window.previewHost.context(v, { styles: { variables: { '--color-text-primary': 'rgb(10, 20, 30)' } } }), id);
        await frame.waitForFunction(() => getComputedStyle(document.body).color === 'rgb(10, 20, 30)', { timeout: 10000 });
      });

      it('answers ui/resource-teardown', async () => {
        const out = await call((v) => window.previewHost.teardown(v), id);
        assert.equal(out.ok, true, `ui/resource-teardown: ${out.message}`);
      });

      it('renders from structuredContent when the host passes no _meta, and says why when it has nothing', async () => {
        ({ id, frame } = await mount());
        const { _meta, ...bare } = getCard;
        assert.ok(_meta);
        await call((v, r) => window.previewHost.toolResult(v, r), id, bare);
        await frame.waitForSelector('#card:not([hidden])');
        assert.deepEqual(await texts('#name'), ['Captain <b>Vey</b>']);
        assert.deepEqual(await texts('#message'), [FIRST]);
        const { _meta: m2, ...bareReview } = review;
        assert.ok(m2);
        await call((v, r) => window.previewHost.toolResult(v, r), id, bareReview);
        await frame.waitForSelector('#card[hidden]');
        const why = (await texts('#empty'))[0];
        assert.match(why, /_meta/);
        assert.match(why, /get_card/);
        await shot('no-card');
        await call((v, r) => window.previewHost.toolResult(v, r), id, missing);
        await frame.waitForFunction((m) => document.getElementById('empty').textContent.endsWith(m), { timeout: 10000 }, missing.content[0].text);
        assert.match((await texts('#empty'))[0], /^The tool call failed/);
        const out = await call((v) => window.previewHost.teardown(v), id);
        assert.equal(out.ok, true, `ui/resource-teardown: ${out.message}`);
      });

      it('logs no console error and no CSP violation', () => {
        assert.deepEqual(host.errors, []);
      });

      it('would see a CSP violation in the view (the check above can fail)', async () => {
        ({ id, frame } = await mount());
        await frame.evaluate(() => {
          const s = document.createElement('script');
          s.textContent = 'window.injected = 1';
          document.body.appendChild(s);
        });
        assert.match(await host.errorMatching(/Content Security Policy/i), /script-src/);
        assert.equal(await frame.evaluate(() => String(window.injected)), 'undefined', 'an inline script not allowed by the CSP ran');
        await call((v) => window.previewHost.teardown(v), id);
        host.errors.length = 0;
      });
    });
  }
});
