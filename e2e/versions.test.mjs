// Writes that never overwrite another's (issue 30): every read of a card, worldbook or trial card
// gives a version; a write whose ifVersion names a state its object has left is refused with
// stale_write, naming what changed and the version now, before anything is sent; a worldbook's
// entries have versions of their own, so two assistants writing different entries do not
// conflict; dryRun shows the change (as diff_revision shows it) and sends nothing. Driven by the
// official TypeScript SDK clients over stdio and streamable HTTP, results validated against the
// tools' output schemas.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';

import { connect, callTool, assertSuccess, assertToolError, serverFor } from './lib/harness.mjs';

for (const [transport, line] of [['stdio', 'v1'], ['http', 'v2']]) {
  describe(`versions over ${transport} (${line})`, () => {
    test('a stale write is refused and sends nothing; a dry run shows the change and sends nothing', async () => {
      const server = await serverFor(transport);
      // Two assistants on one author's cards: two clients of one HTTP server; over stdio (one
      // host, one process with its own sandbox) the second's writes go through the same client.
      const mine = await connect(line, server);
      const theirs = transport === 'http' ? await connect(line, server) : mine;
      const tools = new Map((await mine.listTools()).tools.map((t) => [t.name, t]));
      const ok = async (client, name, args) => {
        const res = await callTool(line, client, name, args);
        assertSuccess(line, tools.get(name), res);
        return res;
      };
      const sc = async (client, name, args) => (await ok(client, name, args)).structuredContent;
      try {
        const { roleId } = await sc(mine, 'create_card', { roleName: 'Versioned' });
        await sc(mine, 'set_opening_lines', { roleId, roleWelcome: 'Mine.' });
        const read = await ok(mine, 'get_card', { roleId });
        const { version } = read.structuredContent;
        assert.match(version ?? '', /^[A-Za-z0-9_-]{20,}$/, 'get_card gives no version');
        assert.ok(read.content.some((c) => c.type === 'text' && c.text.includes(version)), 'the version is not in the text');

        // The other assistant writes the greeting meanwhile.
        await sc(theirs, 'set_opening_lines', { roleId, roleWelcome: 'Theirs.' });
        const revisions = (await sc(mine, 'list_revisions', { roleId })).revisions.length;
        const env = assertToolError('set_opening_lines',
          await callTool(line, mine, 'set_opening_lines', { roleId, roleWelcome: 'Mine again.', ifVersion: version }), 'stale_write');
        assert.deepEqual(env.detail.fields, ['roleWelcome']);
        const now = await sc(mine, 'get_card', { roleId });
        assert.equal(env.detail.version, now.version, 'stale_write does not give the version now');
        assert.equal(now.roleWelcome, 'Theirs.', 'the stale write was applied');
        assert.equal((await sc(mine, 'list_revisions', { roleId })).revisions.length, revisions, 'the stale write kept a revision');

        // A dry run: the change, and nothing sent.
        const dry = await sc(mine, 'set_opening_lines', { roleId, roleWelcome: 'Planned.', ifVersion: now.version, dryRun: true });
        assert.equal(dry.dryRun, true);
        assert.deepEqual(dry.change.fields, [{ field: 'roleWelcome', current: 'Theirs.', after: 'Planned.' }]);
        assert.equal((await sc(mine, 'get_card', { roleId })).roleWelcome, 'Theirs.', 'the dry run was applied');
        assert.equal((await sc(mine, 'list_revisions', { roleId })).revisions.length, revisions, 'the dry run kept a revision');

        // A worldbook: each assistant updates its own entry from the same read; then one writes
        // the other's entry from that read and is refused.
        const { worldbookId } = await sc(mine, 'create_worldbook', { name: 'Shared' });
        await sc(mine, 'write_worldbook_document', { worldbookId, entries: [
          { op: 'create', name: 'A', content: 'a', keywords: ['a'] }, { op: 'create', name: 'B', content: 'b', keywords: ['b'] }] });
        const meta = (await sc(mine, 'get_worldbook', { worldbookId })).version;
        const entries = Object.fromEntries((await sc(mine, 'list_worldbook_entries', { worldbookId })).entries.map((e) => [e.name, e]));
        await sc(mine, 'write_worldbook_document', { worldbookId, ifVersion: meta,
          entries: [{ op: 'update', entryId: entries.A.entryId, content: 'mine', ifVersion: entries.A.version }] });
        await sc(theirs, 'write_worldbook_document', { worldbookId, ifVersion: meta,
          entries: [{ op: 'update', entryId: entries.B.entryId, content: 'theirs', ifVersion: entries.B.version }] });
        const stale = assertToolError('write_worldbook_document', await callTool(line, theirs, 'write_worldbook_document', { worldbookId,
          entries: [{ op: 'delete', entryId: entries.A.entryId, ifVersion: entries.A.version }] }), 'stale_write');
        assert.deepEqual(stale.detail.entries.map((e) => [e.entryId, e.change]), [[entries.A.entryId, 'changed']]);
        const left = (await sc(mine, 'list_worldbook_entries', { worldbookId, detail: 'full' })).entries;
        assert.deepEqual(left.map((e) => e.content).sort(), ['mine', 'theirs'], 'the stale delete was applied');
      } finally {
        await mine.close();
        if (theirs !== mine) await theirs.close();
        await server.stop();
      }
    });
  });
}
