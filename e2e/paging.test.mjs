// Results a model can hold (issue 22), driven by the official TypeScript SDK clients: the list
// tools page with cursor/nextCursor/limit over stdio and HTTP, reaching every entry of a
// generated 1,000-entry worldbook exactly once also with entries added and deleted between pages,
// and on two replicas on Redis behind nginx; query finds a planted entry; a bad cursor is a tool
// error; every result on the real files the repository holds and on the 1,000-entry worldbook
// fits the result budget (cl100k_base tokens of the text and of structuredContent, and
// characters). Replicas need redis-server and nginx: skipped without them, failing under CI=true.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { connect, serverFor, callTool, assertSuccess, assertToolError } from './lib/harness.mjs';
import { startCluster } from './lib/cluster.mjs';
import { ScriptedProvider, connectSignedIn } from './lib/browser.mjs';
import { resultTokens, makeBigWorldbook, loreEntry } from './lib/tasks.mjs';

const REAL = join(dirname(fileURLToPath(import.meta.url)), '..', 'internal', 'tavern', 'taverntest', 'real');
const BUDGET = 10000; // tools.DefaultResultBudget
const MAX_CHARS = 50000; // tools.MaxResultChars

/** Asserts a result within the budget, both ways hosts read it; returns its sizes. */
function assertWithin(name, res) {
  const t = resultTokens(res);
  assert.ok(t.text <= BUDGET && t.structured <= BUDGET && t.chars <= MAX_CHARS,
    `${name}: ${t.text} tokens of text, ${t.structured} of structuredContent, ${t.chars} characters (budget ${BUDGET}, ${MAX_CHARS})`);
  return t;
}

/**
 * Pages through a worldbook's entries with call (which may go to another server each page),
 * running between(page, seen) after each page; returns how often each entryId was listed and whether
 * a page said the list changed.
 */
async function pageAll(call, worldbookId, { limit, between = async () => {} } = {}) {
  const seen = new Map();
  let cursor;
  let changed = false;
  for (let page = 0; ; page++) {
    assert.ok(page < 200, 'paging does not end');
    const args = { worldbookId };
    if (limit) args.limit = limit;
    if (cursor) args.cursor = cursor;
    const res = await call(page, 'list_worldbook_entries', args);
    assertWithin(`page ${page}`, res);
    const out = res.structuredContent;
    assert.equal(out.count, out.entries.length);
    for (const e of out.entries) seen.set(e.entryId, (seen.get(e.entryId) ?? 0) + 1);
    if (out.changed) {
      changed = true;
      assert.match(res.content[0].text, /changed/, 'the change is not in the text');
    }
    cursor = out.nextCursor;
    if (!cursor) {
      assert.equal(out.next, undefined);
      return { seen, changed };
    }
    assert.match(out.next, /cursor/);
    assert.match(res.content[0].text, /cursor/, 'the text does not say how to ask for the next page');
    await between(page, seen);
  }
}

/** The ids of a worldbook's entries (read in full pages of 500, brief). */
async function entryIds(call, worldbookId) {
  const { seen } = await pageAll((_, name, args) => call(name, { ...args, limit: 500 }), worldbookId);
  return [...seen.keys()];
}

for (const transport of ['stdio', 'http']) {
  describe(`paging and budgets over ${transport}`, () => {
    let server;
    let client;
    let tools;
    const call = async (name, args) => {
      const res = await callTool('v1', client, name, args);
      if (!res.isError) assertSuccess('v1', tools.get(name), res);
      return res;
    };
    let worldbookId;
    before(async () => {
      server = await serverFor(transport, { args: ['--sandbox'] });
      client = await connect('v1', server);
      tools = new Map((await client.listTools()).tools.map((t) => [t.name, t]));
      worldbookId = await makeBigWorldbook(call);
    });
    after(async () => {
      await client.close();
      await server.stop();
    });

    it('reaches every entry once, with entries added and deleted between pages', async () => {
      const before = await entryIds(call, worldbookId);
      assert.equal(before.length, 1000);
      const deleted = new Set();
      let listedBefore;
      const { seen, changed } = await pageAll((_, name, args) => call(name, args), worldbookId, {
        between: async (page, seenSoFar) => {
          if (page !== 2) return;
          listedBefore = new Set(seenSoFar.keys());
          const ops = [before[10], before[500], before[999]].map((entryId) => (deleted.add(entryId), { op: 'delete', entryId }));
          ops.push(loreEntry(2000), loreEntry(2001));
          const res = await call('write_worldbook_document', { worldbookId, entries: ops });
          assert.notEqual(res.isError, true);
        },
      });
      assert.ok(changed, 'no page said the list changed');
      for (const id of before) {
        if (deleted.has(id)) {
          assert.ok((seen.get(id) ?? 0) <= 1 && (!seen.get(id) || listedBefore.has(id)), `deleted ${id} listed after its deletion`);
        } else {
          assert.equal(seen.get(id), 1, `entry ${id} listed ${seen.get(id) ?? 0} times`);
        }
      }
      for (const [id, n] of seen) assert.equal(n, 1, `${id} listed ${n} times`);
    });

    it('finds a planted entry by query, in brief', async () => {
      const res = await call('list_worldbook_entries', { worldbookId, query: 'Blind Cartographer' });
      assertWithin('query', res);
      const [first] = res.structuredContent.entries;
      assert.equal(first.name, 'Ilse');
      assert.ok(first.score > 0);
      assert.equal(first.matchOptions, undefined, 'a brief entry carries every field');
    });

    it('refuses a bad cursor with a tool error', async () => {
      const page = (await call('list_worldbook_entries', { worldbookId, limit: 3 })).structuredContent;
      for (const cursor of [page.nextCursor.slice(0, -5), 'not-a-cursor', page.nextCursor.replace(/^./, (c) => (c === 'A' ? 'B' : 'A'))]) {
        assertToolError('list_worldbook_entries', await call('list_worldbook_entries', { worldbookId, cursor }), 'invalid_cursor');
      }
      assertToolError('list_worldbooks', await call('list_worldbooks', { cursor: page.nextCursor }), 'invalid_cursor');
    });

    it('keeps every result on the real files within the budget', async () => {
      const png = readFileSync(join(REAL, 'default_Seraphina.png')).toString('base64');
      const card = await call('import_tavern_card', { source: { dataBase64: png } });
      assertWithin('import_tavern_card', card);
      const roleId = card.structuredContent.roleId;
      const book = await call('import_tavern_worldbook', { source: { json: readFileSync(join(REAL, 'Eldoria.json'), 'utf8') }, roleId });
      assertWithin('import_tavern_worldbook', book);
      const wb = book.structuredContent.worldbookId;
      for (const [name, args] of [
        ['get_card', { roleId }], ['validate_card', { roleId }], ['review_card', { roleId }], ['list_card_worldbooks', { roleId }],
        ['list_worldbooks', {}], ['list_card_assets', { roleId }], ['get_worldbook', { worldbookId: wb }],
        ['list_worldbook_entries', { worldbookId: wb }], ['list_worldbook_entries', { worldbookId: wb, detail: 'full' }],
        ['test_worldbook_triggers', { worldbookId: wb, text: 'Seraphina walks into the Eldoria forest.' }],
        ['review_card', { roleId }], ['list_worldbook_entries', { worldbookId, detail: 'full' }],
        ['test_worldbook_triggers', { worldbookId, text: 'We reach place0500 by the harbour.' }],
      ]) {
        const res = await call(name, args);
        assert.notEqual(res.isError, true, `${name}: ${res.content[0].text}`);
        assertWithin(name, res);
      }
    });
  });
}

describe('paging on two replicas on Redis behind nginx', () => {
  let cluster;
  before(async () => {
    cluster = await startCluster({ replicas: 2, store: 'redis', replicaArgs: ['--user-rate', '0'] });
  });
  after(async () => {
    if (!cluster.skip) await cluster.stop();
  });

  it('pages a worldbook one page on each replica in turn, every entry once', async (t) => {
    if (cluster.skip) return t.skip(cluster.skip);
    const route = { to: null };
    const fetchVia = (url, init) => {
      if (route.to === null) return fetch(url, init);
      const u = new URL(url);
      u.host = cluster.replicaUrl(route.to).host;
      return fetch(u, init);
    };
    const provider = new ScriptedProvider('paging-e2e');
    const client = new Client({ name: 'paging-e2e', version: '1.0.0' });
    const transport = () => new StreamableHTTPClientTransport(cluster.mcpUrl, { fetch: fetchVia, authProvider: provider });
    await connectSignedIn(client, transport, provider);
    try {
      const call = (name, args) => client.callTool({ name, arguments: args });
      const worldbookId = await makeBigWorldbook(call, 300, 100);
      const all = await entryIds(call, worldbookId);
      assert.equal(all.length, 300);
      const replicasUsed = new Set();
      const { seen } = await pageAll(async (page, name, args) => {
        route.to = page % 2;
        replicasUsed.add(route.to);
        try {
          return await call(name, args);
        } finally {
          route.to = null;
        }
      }, worldbookId, { limit: 40 });
      assert.equal(replicasUsed.size, 2);
      assert.equal(seen.size, 300);
      for (const id of all) assert.equal(seen.get(id), 1, `entry ${id} listed ${seen.get(id) ?? 0} times`);
    } finally {
      await client.close();
    }
  });
});
