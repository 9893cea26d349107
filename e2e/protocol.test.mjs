// MCP 2026-07-28 to the letter (issue 33 items 3, 4, 5, 7), driven by the official TypeScript SDK
// v2 as hosts that opt in to the newest revision run it, and by raw JSON-RPC where the SDK
// cannot be made to send what is tested (a version nobody supports):
// - caching hints: the SDK's own response cache serves tools/list again without asking the
//   server (public, an hour), and asks again for resources/list (the user's links: private);
// - MCP Apps through extensions: the preview's _meta.ui goes only to a client that declared
//   io.modelcontextprotocol/ui, and the server declares it;
// - versions: an unsupported version gets UnsupportedProtocolVersion (-32022) with what is
//   supported, over HTTP (1900-01-01, 2024-11-05) and stdio; a 2026-07-28 request's
//   Last-Event-ID is ignored; MCP responses carry X-Accel-Buffering: no;
// - completions: completion/complete for a prompt argument and card://{roleId}.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

import { BIN, LINES, cleanEnv, connect, serverFor } from './lib/harness.mjs';

const APPS = { 'io.modelcontextprotocol/ui': { mimeTypes: ['text/html;profile=mcp-app'] } };
const META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
};

describe('SDK v2 (2026-07-28) over HTTP: caching hints, MCP Apps, versions', () => {
  let server;
  before(async () => {
    server = await serverFor('http');
  });
  after(async () => {
    await server?.stop();
  });

  /** A v2 client on 2026-07-28 whose requests are counted by method, and their responses kept. */
  async function counted(capabilities = {}) {
    const seen = { methods: [], headers: [] };
    const fetchCounted = async (url, init) => {
      const res = await fetch(url, init);
      seen.methods.push(new Headers(init?.headers).get('mcp-method'));
      seen.headers.push(res.headers);
      return res;
    };
    const line = LINES.v2m;
    const client = new line.Client({ name: 'e2e-cache', version: '1.0.0' }, { capabilities, ...line.options });
    await client.connect(new line.Http(new URL(server.url), { fetch: fetchCounted }));
    return { client, seen };
  }

  test('tools/list is served from the SDK cache; resources/list is asked for again; streams are not buffered', async () => {
    const { client, seen } = await counted();
    try {
      await client.listTools();
      const asked = seen.methods.filter((m) => m === 'tools/list').length;
      await client.listTools();
      assert.equal(seen.methods.filter((m) => m === 'tools/list').length, asked, 'the second tools/list went to the server: not cacheable');
      await client.listResources();
      await client.listResources();
      assert.equal(seen.methods.filter((m) => m === 'resources/list').length, 2, 'resources/list (the user\'s links) was served from a cache');
      for (const h of seen.headers) {
        assert.equal(h.get('x-accel-buffering'), 'no', 'an MCP response without X-Accel-Buffering: no');
      }
    } finally {
      await client.close();
    }
  });

  test('the preview\'s _meta.ui only for a client that declared the MCP Apps extension', async () => {
    for (const declared of [true, false]) {
      const { client } = await counted(declared ? { extensions: APPS } : {});
      try {
        assert.ok(client.getServerCapabilities()?.extensions?.['io.modelcontextprotocol/ui'], 'the server does not declare MCP Apps');
        const getCard = (await client.listTools()).tools.find((t) => t.name === 'get_card');
        assert.equal(getCard._meta?.ui?.resourceUri, declared ? 'ui://cardwriter/card-preview' : undefined,
          `declared ${declared}: get_card's _meta ${JSON.stringify(getCard._meta)}`);
      } finally {
        await client.close();
      }
    }
  });

  test('completion/complete gives the caller\'s ids for a prompt argument and card://{roleId}', async () => {
    const { client } = await counted();
    try {
      assert.ok(client.getServerCapabilities()?.completions, 'the server does not declare completions');
      const call = async (name, args) => (await LINES.v2m.callTool(client, { name, arguments: args })).structuredContent;
      const { roleId } = await call('create_card', { roleName: 'Vey' });
      const { worldbookId } = await call('create_worldbook', { name: 'Lighthouse lore' });
      await call('write_worldbook_document', { worldbookId, binding: { roleId }, entries: [] });
      const byName = await client.complete({ ref: { type: 'ref/prompt', name: 'build_worldbook' }, argument: { name: 'worldbookId', value: 'lightho' } });
      assert.deepEqual(byName.completion.values, [worldbookId]);
      const card = await client.complete({ ref: { type: 'ref/resource', uri: 'card://{roleId}' }, argument: { name: 'roleId', value: roleId.slice(0, 4) } });
      assert.ok(card.completion.values.includes(roleId), JSON.stringify(card));
    } finally {
      await client.close();
    }
  });

  test('an unsupported version is UnsupportedProtocolVersion with what is supported; Last-Event-ID is ignored', async () => {
    for (const version of ['1900-01-01', '2024-11-05']) {
      const res = await fetch(server.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': version },
        body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list' }),
      });
      assert.equal(res.status, 400);
      assert.match(res.headers.get('content-type'), /application\/json/);
      const body = await res.json();
      assert.equal(body.id, 7);
      assert.equal(body.error.code, -32022, JSON.stringify(body));
      assert.equal(body.error.data.requested, version);
      assert.ok(body.error.data.supported.includes('2026-07-28'));
    }
    const res = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/list', 'last-event-id': '42' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'tools/list', params: { _meta: META } }),
    });
    assert.equal(res.status, 200, `Last-Event-ID refused: ${await res.clone().text()}`);
    assert.ok((await res.json()).result.tools.length > 0);
  });
});

describe('stdio: an unsupported version', () => {
  test('is answered UnsupportedProtocolVersion, server/discover included; a v2 client still connects', async () => {
    const proc = spawn(BIN, ['stdio', '--sandbox'], { env: cleanEnv(), stdio: ['pipe', 'pipe', 'ignore'] });
    const lines = createInterface({ input: proc.stdout });
    const answers = new Map();
    const waiting = new Map();
    lines.on('line', (l) => {
      const m = JSON.parse(l);
      if (m.id === undefined) return;
      answers.set(m.id, m);
      waiting.get(m.id)?.(m);
    });
    const ask = (id, method, params) => new Promise((resolve) => {
      waiting.set(id, resolve);
      proc.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
    });
    try {
      for (const [id, method] of [[1, 'tools/list'], [2, 'server/discover']]) {
        const m = await ask(id, method, { _meta: { ...META, 'io.modelcontextprotocol/protocolVersion': '1900-01-01' } });
        assert.equal(m.error?.code, -32022, `${method}: ${JSON.stringify(m)}`);
        assert.equal(m.error.data.requested, '1900-01-01');
        assert.ok(m.error.data.supported.includes('2026-07-28'));
      }
      const ok = await ask(3, 'server/discover', { _meta: META });
      assert.ok(ok.result?.supportedVersions?.includes('2026-07-28'), JSON.stringify(ok));
    } finally {
      proc.kill();
    }
    const client = await connect('v2m', await serverFor('stdio'));
    assert.ok((await client.listTools()).tools.length > 0);
    await client.close();
  });
});
