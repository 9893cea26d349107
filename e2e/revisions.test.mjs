// Revisions (issue 23), driven by the official TypeScript SDK clients as hosts drive the server:
// on SillyTavern's real Seraphina card and Eldoria lorebook (internal/tavern/taverntest/real),
// each write tool overwrites, clears or deletes, and restore_revision brings back exactly the
// earlier state (field for field, entries in full by content); a restore of a restore; a restore
// asks nothing; retention drops the oldest and says so; the revisions outlive a
// restart (stdio's file in the config dir, and the HTTP server's embedded state.db); two HTTP replicas sharing Redis list and restore each other's
// revisions, and another signed-in user can neither list nor restore them. The Redis part needs
// redis-server (skipped without it, failing under CI=true).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { connect, callTool, assertSuccess, assertToolError, startProcess, startSandbox } from './lib/harness.mjs';
import { need, startRedis } from './lib/cluster.mjs';
import { signInAt } from './lib/browser.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const real = (name) => readFileSync(path.join(here, '..', 'internal', 'tavern', 'taverntest', 'real', name)).toString('base64');
const SERAPHINA = real('default_Seraphina.png');
const ELDORIA = real('Eldoria.json');

/** A client of one server whose calls must succeed (validated against the output schemas). */
class Session {
  constructor(line, client) {
    this.line = line;
    this.client = client;
  }

  async tools() {
    if (!this.byName) this.byName = new Map((await this.client.listTools()).tools.map((t) => [t.name, t]));
    return this.byName;
  }

  async raw(name, args) {
    return callTool(this.line, this.client, name, args);
  }

  async ok(name, args) {
    const res = await this.raw(name, args);
    assertSuccess(this.line, (await this.tools()).get(name), res);
    return res;
  }

  async sc(name, args) {
    return (await this.ok(name, args)).structuredContent;
  }

  /** A write: its result names the revision it kept, in structuredContent and in its text. */
  async write(name, args) {
    const res = await this.ok(name, args);
    const id = res.structuredContent.revision?.revisionId;
    assert.match(id ?? '', /^rv_[0-9a-v]{26}$/, `${name} names no revision: ${JSON.stringify(res.structuredContent)}`);
    assert.ok(res.content[0].text.includes(id) && res.content[0].text.includes('restore_revision'), `${name}: the text does not name ${id}`);
    return { sc: res.structuredContent, id, text: res.content[0].text };
  }

  /** What a revision of kind/id holds, comparable field for field (entries by content). */
  async state(kind, id) {
    if (kind === 'card') {
      const card = await this.sc('get_card', { roleId: id });
      delete card.lastUpdateTime;
      return card;
    }
    if (kind === 'worldbook') {
      const wb = await this.sc('get_worldbook', { worldbookId: id });
      // Every entry in full (isEnabled and every other field), every page.
      const entries = [];
      for (let cursor; ;) {
        const page = await this.sc('list_worldbook_entries', { worldbookId: id, detail: 'full', ...(cursor ? { cursor } : {}) });
        for (const e of page.entries) {
          const { entryId, lastUpdateTime, activationCount, ...rest } = e;
          entries.push(JSON.stringify(rest, Object.keys(rest).sort()));
        }
        if (!(cursor = page.nextCursor)) break;
      }
      entries.sort();
      return { name: wb.name, description: wb.description, tags: wb.tags, boundRoleIds: wb.boundRoleIds, entries };
    }
    const res = await this.raw('get_trial_card', { clientKey: id });
    if (res.isError) return 'gone';
    return { sections: res.structuredContent.sections, entries: res.structuredContent.worldbook.entries };
  }
}

async function open(line, server, opts) {
  return new Session(line, await connect(line, server, opts));
}

/** The stdio server as a host starts it, with its config dir (where it keeps revisions) and a sandbox data file. */
function stdioServer(dir, extra = []) {
  return { transport: 'stdio', args: ['stdio', '--sandbox', '--sandbox-data', path.join(dir, 'sandbox.json'), ...extra],
    env: { CARDWRITER_CONFIG_DIR: path.join(dir, 'config') } };
}

/** Seraphina imported as a card with her lorebook, Eldoria as a worldbook, and a trial card. */
async function seed(s) {
  const imp = await s.sc('import_tavern_card', { source: { dataBase64: SERAPHINA } });
  const wb = await s.sc('import_tavern_worldbook', { source: { dataBase64: ELDORIA } });
  await s.sc('upsert_trial_card', { clientKey: 'seraphina-trial', card: { roleName: 'Seraphina', roleWelcome: '*You wake in a glade.*',
    welcomeAlternates: ['Hello.'], sections: { description: 'A guardian.' } },
  worldbook: { entries: [{ name: 'Glade', content: 'A quiet glade.', keywords: ['glade'] }] } });
  return { roleId: imp.roleId, worldbookId: wb.worldbookId, clientKey: 'seraphina-trial' };
}

/** Every write tool: what it overwrites, clears or deletes. */
const WRITES = [
  ['set_opening_lines', 'card', (o) => ({ roleId: o.roleId, roleWelcome: 'Gone.', alternates: [], prologue: [] })],
  ['update_card_profile', 'card', (o) => ({ roleId: o.roleId, roleName: 'Someone Else', roleDesc: '', tags: [], avatarImageId: '' })],
  ['write_card_document', 'card', (o) => ({ roleId: o.roleId, sections: { description: '', personality: 'Rewritten.', scenario: '' } })],
  ['set_card_visibility', 'card', (o) => ({ roleId: o.roleId, visibility: 'private' })],
  ['write_worldbook_document', 'worldbook', (o, entries) => ({ worldbookId: o.worldbookId, metadata: { name: 'Renamed', tags: ['x'] },
    entries: [{ op: 'delete', entryId: entries[0].entryId }, { op: 'delete', entryId: entries[1].entryId },
      { op: 'update', entryId: entries[2].entryId, content: '', keywords: ['nothing'], isEnabled: false },
      { op: 'create', name: 'New', content: 'New lore.', keywords: ['new'] }] })],
  ['import_tavern_worldbook', 'worldbook', (o) => ({ source: { dataBase64: ELDORIA }, worldbookId: o.worldbookId })],
  ['import_tavern_card', 'card', () => ({ source: { dataBase64: SERAPHINA } })],
  ['upsert_trial_card', 'trial', (o) => ({ clientKey: o.clientKey, card: { roleName: 'Replaced' }, worldbook: { entries: [] } })],
  ['delete_trial_card', 'trial', (o) => ({ clientKey: o.clientKey })],
];

const objectId = (kind, o) => ({ card: o.roleId, worldbook: o.worldbookId, trial: o.clientKey }[kind]);
const listArg = (kind, id) => ({ card: { roleId: id }, worldbook: { worldbookId: id }, trial: { clientKey: id } }[kind]);

describe('revisions over stdio (the embedded store in the config dir)', () => {
  for (const line of ['v1', 'v2m']) {
    test(`${line}: every write tool on the real cards is undone by restore_revision, and a restore by another`, async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'cw-rev-'));
      const s = await open(line, stdioServer(dir));
      try {
        const o = await seed(s);
        for (const [tool, kind, args] of WRITES) {
          const id = objectId(kind, o);
          // The author's own edits since the import: what a second import writes over.
          await s.sc('set_opening_lines', { roleId: o.roleId, roleWelcome: 'Edited by the author.', alternates: ['An alternate.'] });
          if (kind === 'trial' && (await s.state('trial', id)) === 'gone') {
            await s.sc('upsert_trial_card', { clientKey: id, card: { roleName: 'Seraphina', roleWelcome: 'Back.' }, worldbook: { entries: [] } });
          }
          const before = await s.state(kind, id);
          const entries = kind === 'worldbook' ? (await s.sc('list_worldbook_entries', { worldbookId: id })).entries : [];
          const w = await s.write(tool, args(o, entries));
          const after = await s.state(kind, id);
          if (tool !== 'set_card_visibility') assert.notDeepEqual(after, before, `${tool} changed nothing`);
          const listed = await s.sc('list_revisions', listArg(kind, id));
          assert.equal(listed.revisions[0].revisionId, w.id, `${tool}: list_revisions does not start with its revision`);
          assert.equal(listed.revisions[0].tool, tool);
          const restored = await s.sc('restore_revision', { revisionId: w.id });
          assert.deepEqual(await s.state(kind, id), before, `${tool}: restore_revision did not bring back the earlier state`);
          assert.equal((await s.sc('diff_revision', { revisionId: w.id })).same, true, `${tool}: diff after the restore`);
          if (restored.revision) {
            await s.sc('restore_revision', { revisionId: restored.revision.revisionId });
            assert.deepEqual(await s.state(kind, id), after, `${tool}: the restore of the restore`);
            await s.sc('restore_revision', { revisionId: w.id });
          }
        }
      } finally {
        await s.client.close();
      }
    });
  }

  test('v1: the revisions outlive a restart of the stdio server', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'cw-rev-'));
    let s = await open('v1', stdioServer(dir));
    const o = await seed(s);
    const before = await s.state('card', o.roleId);
    const w = await s.write('write_card_document', { roleId: o.roleId, sections: { description: '' } });
    await s.client.close();
    s = await open('v1', stdioServer(dir));
    try {
      const listed = await s.sc('list_revisions', { roleId: o.roleId });
      assert.equal(listed.revisions[0].revisionId, w.id);
      await s.sc('restore_revision', { revisionId: w.id });
      assert.deepEqual(await s.state('card', o.roleId), before);
    } finally {
      await s.client.close();
    }
  });

  test('v2: over HTTP, the revisions outlive a restart of the embedded store (state.db)', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'cw-rev-'));
    const args = ['--sandbox', '--sandbox-data', path.join(dir, 'sandbox.json'), '--state-dir', path.join(dir, 'state')];
    const start = async () => {
      const p = await startProcess(['http', '--addr', '127.0.0.1:0', '--log-level', 'warn', ...args], /MCP endpoint: (http:\/\/\S+\/mcp)/);
      return { p, s: await open('v2', { transport: 'http', url: p.match[1] }) };
    };
    let { p, s } = await start();
    const card = await s.sc('create_card', { roleName: 'Restarted' });
    await s.sc('set_opening_lines', { roleId: card.roleId, roleWelcome: 'Kept.', alternates: ['One.'] });
    const before = await s.state('card', card.roleId);
    const w = await s.write('set_opening_lines', { roleId: card.roleId, roleWelcome: 'Lost?', alternates: [] });
    await s.client.close();
    await p.stop();
    ({ p, s } = await start());
    try {
      assert.equal((await s.sc('list_revisions', { roleId: card.roleId })).revisions[0].revisionId, w.id);
      await s.sc('restore_revision', { revisionId: w.id });
      assert.deepEqual(await s.state('card', card.roleId), before);
    } finally {
      await s.client.close();
      await p.stop();
    }
  });

  test('v1: restore_revision asks nothing, even a client that declines every question; its revision undoes it', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'cw-rev-'));
    const s = await open('v1', stdioServer(dir), { capabilities: { elicitation: {} } });
    const asked = [];
    s.client.setRequestHandler(ElicitRequestSchema, (req) => { asked.push(req.params.message); return { action: 'decline' }; });
    try {
      const card = await s.sc('create_card', { roleName: 'Asked' });
      await s.sc('set_opening_lines', { roleId: card.roleId, roleWelcome: 'Before.' });
      const before = await s.state('card', card.roleId);
      const w = await s.write('set_opening_lines', { roleId: card.roleId, roleWelcome: 'After.' });
      const after = await s.state('card', card.roleId);
      const r = await s.write('restore_revision', { revisionId: w.id });
      assert.deepEqual(await s.state('card', card.roleId), before);
      await s.write('restore_revision', { revisionId: r.id });
      assert.deepEqual(await s.state('card', card.roleId), after, 'the restore\'s own revision does not undo it');
      assert.deepEqual(asked, [], 'restore_revision asked');
    } finally {
      await s.client.close();
    }
  });

  test('v2: retention drops the oldest revision and says so', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'cw-rev-'));
    const s = await open('v2', stdioServer(dir, ['--revisions-per-object', '2']));
    try {
      const card = await s.sc('create_card', { roleName: 'Kept' });
      const first = await s.write('set_opening_lines', { roleId: card.roleId, roleWelcome: '1' });
      await s.write('set_opening_lines', { roleId: card.roleId, roleWelcome: '2' });
      const third = await s.write('set_opening_lines', { roleId: card.roleId, roleWelcome: '3' });
      assert.equal(third.sc.revision.dropped, 1);
      assert.match(third.text, /Retention dropped 1 revision, the oldest/);
      const ids = (await s.sc('list_revisions', { roleId: card.roleId })).revisions.map((r) => r.revisionId);
      assert.equal(ids.length, 2);
      assert.ok(!ids.includes(first.id));
      assertToolError('restore_revision', await s.raw('restore_revision', { revisionId: first.id }), 'revision_not_found');
    } finally {
      await s.client.close();
    }
  });
});

/** An access token of the sandbox for account, by its own OAuth flow (PKCE), as a host gets one. */
async function tokenFor(apiHost, account) {
  const meta = await (await fetch(`${apiHost}/.well-known/oauth-authorization-server`)).json();
  const redirect = 'http://127.0.0.1:9/callback';
  const reg = await (await fetch(meta.registration_endpoint, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'e2e revisions', redirect_uris: [redirect], token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code'], response_types: ['code'] }) })).json();
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  const u = new URL(meta.authorization_endpoint);
  for (const [k, v] of Object.entries({ response_type: 'code', client_id: reg.client_id, redirect_uri: redirect, scope: 'mcp:card-writer',
    state: 'x', code_challenge: challenge, code_challenge_method: 'S256', resource: `${apiHost}/open/v1` })) u.searchParams.set(k, v);
  const back = await signInAt(u.href, redirect, { account });
  const tok = await (await fetch(meta.token_endpoint, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code: back.searchParams.get('code'), redirect_uri: redirect,
      client_id: reg.client_id, code_verifier: verifier, resource: `${apiHost}/open/v1` }) })).json();
  assert.ok(tok.access_token, `no token for ${account}: ${JSON.stringify(tok)}`);
  return tok.access_token;
}

/** A TypeScript SDK v1 client of url with a card service token (passthrough). */
async function bearer(url, token, name) {
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return new Session('v1', client);
}

describe('two HTTP replicas sharing Redis', () => {
  let redis;
  let sandbox;
  let replicas = [];
  let skip;
  before(async () => {
    const bin = need('redis-server', 'redis-server');
    if (bin.skip) {
      skip = bin.skip;
      return;
    }
    redis = await startRedis(bin.path);
    // A sandbox that knows a second author besides the demo one.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'cw-rev-'));
    const sharedStateKey = randomBytes(32).toString('base64');
    const data = path.join(dir, 'sandbox.json');
    writeFileSync(data, JSON.stringify({ version: 1, users: {
      u_demo: { id: 'u_demo', nickname: 'Demo Author', scopes: ['mcp:card-writer'] },
      u_other: { id: 'u_other', nickname: 'Other Author', scopes: ['mcp:card-writer'] } } }));
    sandbox = await startSandbox('e2e-demo-token', ['--data', data]);
    for (let i = 0; i < 2; i++) {
      // One state key: the replicas seal the records they share (revisions, sessions) with it.
      replicas.push(await startProcess(['http', '--addr', '127.0.0.1:0', '--api-host', sandbox.apiHost, '--auth', 'passthrough',
        '--store', redis.url, '--state-dir', mkdtempSync(path.join(os.tmpdir(), 'cw-state-')), '--log-level', 'warn'],
      /MCP endpoint: (http:\/\/\S+\/mcp)/, { env: { CARDWRITER_STATE_KEY: sharedStateKey } }));
    }
  });
  after(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    if (sandbox) await sandbox.stop();
    if (redis) await redis.stop();
  });

  test('a revision kept on one replica is listed and restored on the other; another user sees none', async (t) => {
    if (skip) return t.skip(skip);
    const a = await bearer(replicas[0].match[1], sandbox.token, 'replica a');
    const b = await bearer(replicas[1].match[1], sandbox.token, 'replica b');
    const other = await bearer(replicas[1].match[1], await tokenFor(sandbox.apiHost, 'Other Author'), 'other user');
    try {
      const o = await seed(a);
      const before = await b.state('worldbook', o.worldbookId);
      const entries = (await a.sc('list_worldbook_entries', { worldbookId: o.worldbookId })).entries;
      const w = await a.write('write_worldbook_document', WRITES[4][2](o, entries));
      const listed = await b.sc('list_revisions', { worldbookId: o.worldbookId });
      assert.equal(listed.revisions[0].revisionId, w.id, 'the other replica does not list the revision');
      const r = await b.sc('restore_revision', { revisionId: w.id });
      assert.deepEqual(await a.state('worldbook', o.worldbookId), before);
      assert.ok(r.notRestored.some((n) => n.includes('new ids')), `deleted entries not said to come back with new ids: ${r.notRestored}`);

      assert.equal((await other.sc('list_revisions', {})).revisions.length, 0, 'another user lists the revisions');
      for (const tool of ['restore_revision', 'diff_revision']) {
        assertToolError(tool, await other.raw(tool, { revisionId: w.id }), 'revision_not_found');
      }
    } finally {
      await Promise.all([a, b, other].map((s) => s.client.close()));
    }
  });
});
