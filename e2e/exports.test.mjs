// Large exports by reference, driven by the official TypeScript SDK clients as hosts drive the
// server: a card built from SillyTavern's Seraphina (internal/tavern/taverntest/real) with a
// generated 1,500-entry lorebook is too large for a result, so export_tavern_card and
// export_tavern_worldbook return a resource_link whose resources/read gives the very bytes
// `cardwriter-mcp export` writes (stdio, SDK v1 and v2), listed by resources/list; over stdio with
// a folder open, the same file is written there by default, and path writes it too. Over HTTP in
// proxy mode, on two replicas on one Redis behind nginx, the link reads back on both replicas for
// the user who exported, is listed and refused (-32002) to another signed-in user, its downloadUrl
// gives a browser the same bytes, and it is refused once its --export-ttl has passed (polled, not
// slept for).
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, realpathSync } from 'node:fs';
import { promisify } from 'node:util';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { BIN, cleanEnv, connect, callTool, assertSuccess } from './lib/harness.mjs';
import { startCluster } from './lib/cluster.mjs';
import { ScriptedProvider, signInAt, connectSignedIn } from './lib/browser.mjs';

const REAL = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'internal', 'tavern', 'taverntest', 'real');
const SERAPHINA = readFileSync(path.join(REAL, 'default_Seraphina.png')).toString('base64');

/** Asserts a success result of tool (harness.assertSuccess) and returns the whole result. */
function ok(line, tool, res) {
  assertSuccess(line, tool, res);
  return res;
}

/** A character_book of n generated entries: far over the result budget once exported. */
function bigBook(n) {
  const entries = [];
  for (let i = 0; i < n; i++) {
    entries.push({ keys: [`place${i}`], content: `Place ${i} lies on the old road, past the ${i}th milestone, where the cartographers meet.`,
      name: `Place ${i}`, insertion_order: i, enabled: true });
  }
  return { name: 'The Old Road', entries };
}

/** Imports Seraphina and adds the big lorebook to her worldbook; returns roleId and worldbookId. */
async function buildLargeCard(call) {
  const imp = await call('import_tavern_card', { source: { dataBase64: SERAPHINA } });
  const { roleId, worldbookId, entryCount } = imp.structuredContent;
  await call('import_tavern_worldbook', { source: { json: bigBook(1500) }, worldbookId });
  return { roleId, worldbookId, entries: entryCount + 1500 };
}

/** Asserts an export result sent by reference and returns its structuredContent.link. */
function linkOf(res) {
  const sc = res.structuredContent;
  assert.ok(sc.link, `no link in ${Object.keys(sc)}`);
  assert.equal(sc.card, undefined);
  assert.equal(sc.lorebook, undefined);
  assert.equal(sc.dataBase64, undefined);
  const rl = res.content.find((c) => c.type === 'resource_link');
  assert.ok(rl, `no resource_link content: ${res.content.map((c) => c.type)}`);
  assert.equal(rl.uri, sc.link.uri);
  assert.equal(rl.mimeType, sc.link.mimeType);
  assert.equal(rl.size, sc.link.size);
  assert.ok(res.content[0].text.includes(sc.link.uri), 'the text does not say where the file is');
  return sc.link;
}

/** The bytes of a resources/read answer: its text, or its blob decoded. */
function bytesOf(read) {
  assert.equal(read.contents.length, 1);
  const c = read.contents[0];
  return c.blob !== undefined ? Buffer.from(c.blob, 'base64') : Buffer.from(c.text, 'utf8');
}

const run = promisify(execFile);

for (const line of ['v1', 'v2']) {
  test(`stdio, SDK ${line}: a large export comes by resource_link and reads back as the file \`cardwriter-mcp export\` writes; with a folder open, it is written there by default`, async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'cw-exports-'));
    const data = path.join(dir, 'sandbox.json');
    const out = path.join(dir, 'out');
    const open = async (extra) => {
      const client = await connect(line, { transport: 'stdio', args: ['stdio', '--sandbox', '--sandbox-data', data, ...extra], env: {} });
      const tools = new Map((await client.listTools()).tools.map((t) => [t.name, t]));
      return { client, call: async (name, args) => ok(line, tools.get(name), await callTool(line, client, name, args)) };
    };
    const exports = (roleId, worldbookId) => [
      ['export_tavern_card', { roleId, format: 'json' }, ['export', roleId, '--format', 'json']],
      ['export_tavern_card', { roleId, format: 'png' }, ['export', roleId, '--format', 'png']],
      ['export_tavern_worldbook', { worldbookId, format: 'lorebook_v3' }, ['export-worldbook', worldbookId, '--format', 'lorebook_v3']],
    ];
    const want = {};
    // No folder open to the server (no roots, no --allow-dir): by link.
    let { client, call } = await open([]);
    let ids;
    try {
      ids = await buildLargeCard(call);
      for (const [tool, args, cli] of exports(ids.roleId, ids.worldbookId)) {
        const link = linkOf(await call(tool, args));
        const got = bytesOf(await client.readResource({ uri: link.uri }));
        const file = `${out}-${args.format}`;
        await run(BIN, [...cli, '-o', file, '--sandbox', '--sandbox-data', data], { env: cleanEnv() });
        want[args.format] = readFileSync(file);
        assert.equal(got.length, want[args.format].length, `${tool} ${args.format}: resources/read gives ${got.length} bytes, the CLI ${want[args.format].length}`);
        assert.ok(got.equals(want[args.format]), `${tool} ${args.format}: resources/read is not the file the CLI writes`);
        assert.equal(link.size, want[args.format].length);
        const listed = (await client.listResources()).resources.map((r) => r.uri);
        assert.ok(listed.includes(link.uri), `resources/list does not name ${link.uri}: ${listed}`);
      }
      // Nothing of another export is readable by guessing.
      await assert.rejects(client.readResource({ uri: 'export://00000000000000000000000000000000' }), (e) => e.code === -32002);
    } finally {
      await client.close();
    }
    // --allow-dir: written there by default, as a new file; path writes the same file.
    ({ client, call } = await open(['--allow-dir', dir]));
    try {
      for (const [tool, args] of exports(ids.roleId, ids.worldbookId)) {
        const res = await call(tool, args);
        const { written } = res.structuredContent;
        assert.ok(written, `${tool} ${args.format}: not written by default: ${Object.keys(res.structuredContent)}`);
        assert.equal(path.dirname(written.path), realpathSync(dir));
        assert.ok(res.content[0].text.includes(written.path), 'the text does not say where the file is');
        assert.ok(readFileSync(written.path).equals(want[args.format]), `${tool} ${args.format}: the file written by default differs`);
        const dest = path.join(dir, `by-path-${args.format}`);
        const byPath = await call(tool, { ...args, path: dest });
        assert.equal(byPath.structuredContent.written.size, want[args.format].length);
        assert.ok(readFileSync(dest).equals(want[args.format]), `${tool} ${args.format}: the file path wrote differs`);
      }
    } finally {
      await client.close();
    }
  });
}

test('stdio: an export is refused once --export-ttl has passed', async () => {
  const server = { transport: 'stdio', args: ['stdio', '--sandbox', '--export-ttl', '1s'], env: {} };
  const client = await connect('v1', server);
  const tools = new Map((await client.listTools()).tools.map((t) => [t.name, t]));
  const call = async (name, args) => ok('v1', tools.get(name), await callTool('v1', client, name, args));
  try {
    const { roleId } = await buildLargeCard(call);
    const link = linkOf(await call('export_tavern_card', { roleId }));
    let refused;
    for (let i = 0; i < 600 && !refused; i++) {
      try {
        await client.readResource({ uri: link.uri });
        await new Promise((r) => setTimeout(r, 100)); // poll until it expires
      } catch (e) {
        refused = e;
      }
    }
    assert.ok(refused, 'the export was still readable a minute after its 1 s TTL');
    assert.equal(refused.code, -32002, `refused with ${refused.code}: ${refused.message}`);
    assert.ok(Date.parse(link.expiresAt) <= Date.now(), 'refused before expiresAt');
  } finally {
    await client.close();
  }
});

/** A v1 client of the cluster signed in through the proxy as one of the sandbox's accounts. */
class Host {
  constructor(cluster, account) {
    this.cluster = cluster;
    this.route = { to: null };
    this.provider = new ScriptedProvider(`exports-${account}`);
    this.provider.redirectToAuthorization = async (url) => {
      const back = await signInAt(url, this.provider.redirect, { account });
      this.provider.code = back.searchParams.get('code');
    };
    this.fetch = cluster.routedFetch(this.route);
  }

  transport() {
    return new StreamableHTTPClientTransport(this.cluster.mcpUrl, { fetch: this.fetch, authProvider: this.provider });
  }

  async connect() {
    this.client = new Client({ name: 'exports-e2e', version: '1.0.0' });
    await connectSignedIn(this.client, () => this.transport(), this.provider);
    this.tools = new Map((await this.client.listTools()).tools.map((tool) => [tool.name, tool]));
    return this;
  }

  async call(name, args) {
    return ok('v1', this.tools.get(name), await this.client.callTool({ name, arguments: args }));
  }

  async read(uri, replica) {
    this.route.to = replica;
    try {
      return await this.client.readResource({ uri });
    } finally {
      this.route.to = null;
    }
  }
}

describe('HTTP proxy mode, two replicas on one Redis: the link is its owner\'s, on any replica, until it expires', () => {
  let cluster;
  before(async () => {
    cluster = await startCluster({ replicas: 2, store: 'redis', replicaArgs: ['--export-ttl', '20s'],
      users: [{ id: 'u_other', nickname: 'Other Author' }] });
  });
  after(async () => {
    if (!cluster.skip) await cluster.stop();
  });

  test('read by its owner on both replicas, refused to another user and after the TTL', async (t) => {
    if (cluster.skip) return t.skip(cluster.skip);
    const owner = await new Host(cluster, 'Demo Author').connect();
    const other = await new Host(cluster, 'Other Author').connect();
    try {
      assert.notEqual((await owner.call('whoami', {})).structuredContent.userId, (await other.call('whoami', {})).structuredContent.userId);
      const { roleId, entries } = await buildLargeCard((name, args) => owner.call(name, args));
      const link = linkOf(await owner.call('export_tavern_card', { roleId }));
      const onFirst = bytesOf(await owner.read(link.uri, 0));
      const onSecond = bytesOf(await owner.read(link.uri, 1));
      assert.ok(onFirst.equals(onSecond), 'the replicas give different bytes');
      assert.equal(onFirst.length, link.size);
      const card = JSON.parse(onFirst.toString('utf8'));
      assert.equal(card.spec, 'chara_card_v3');
      assert.equal(card.data.character_book.entries.length, entries);

      for (const replica of [0, 1]) {
        await assert.rejects(other.read(link.uri, replica), (e) => e.code === -32002, 'another user read the export');
      }
      // The author's browser: the download URL, with no sign-in, on the public URL.
      assert.ok(link.downloadUrl, 'no downloadUrl over HTTP');
      const dl = await fetch(link.downloadUrl);
      assert.equal(dl.status, 200, `GET downloadUrl: ${dl.status}`);
      assert.match(dl.headers.get('content-disposition') ?? '', /^attachment/);
      assert.ok(Buffer.from(await dl.arrayBuffer()).equals(onFirst), 'the download differs from resources/read');
      const last = link.downloadUrl.at(-1);
      assert.equal((await fetch(link.downloadUrl.slice(0, -1) + (last === 'A' ? 'B' : 'A'))).status, 404, 'a changed signature downloaded');
      // resources/list names it to its owner only (Gemini CLI reads only listed URIs).
      assert.ok((await owner.client.listResources()).resources.some((r) => r.uri === link.uri), 'not listed for its owner');
      assert.ok(!(await other.client.listResources()).resources.some((r) => r.uri === link.uri), 'listed for another user');
      // The other user's own export is theirs alone, the other way round too.
      const mine = await other.call('create_card', { roleName: 'Other' });
      const small = await other.call('export_tavern_card', { roleId: mine.structuredContent.roleId });
      assert.ok(small.structuredContent.card, 'a small card did not stay inline');

      let refused;
      for (let i = 0; i < 1200 && !refused; i++) {
        try {
          await owner.read(link.uri, i % 2);
          await new Promise((r) => setTimeout(r, 100)); // poll until it expires
        } catch (e) {
          refused = e;
        }
      }
      assert.ok(refused, 'the export was still readable two minutes after its 20 s TTL');
      assert.equal(refused.code, -32002, `refused with ${refused.code}: ${refused.message}`);
    } finally {
      await owner.client.close();
      await other.client.close();
    }
  });
});
