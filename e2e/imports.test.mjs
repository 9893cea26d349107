// Long work that survives a dropped connection (issue 33 item 6), driven by the official
// TypeScript SDK v2 on the 2026-07-28 revision: a 5,000-entry lorebook imported against a slow
// card service (the sandbox's latency injection on every entry write), the connection cut
// half-way (when progress says half the steps are done), and the same import issued again. The
// end is exactly one worldbook holding all 5,000 entries: over HTTP the import finished detached
// from its request and the second call returns its recorded result; over stdio the host's
// cutting the connection ends the server, and the second server finishes the first's worldbook.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { connect, callTool, assertSuccess, serverFor, startSandbox } from './lib/harness.mjs';

const ENTRIES = 5000;
const LINE = 'v2m';

/** A SillyTavern World Info file of n entries. */
function lorebook(n) {
  const entries = {};
  for (let i = 0; i < n; i++) {
    entries[i] = { uid: i, key: [`mark${i}`], content: `Milestone ${i} of the old road, where the cartographers meet.`, comment: `Milestone ${i}` };
  }
  return { name: 'The Old Road', entries };
}

for (const transport of ['http', 'stdio']) {
  describe(`SDK v2 (2026-07-28) over ${transport}: an import cut half-way`, () => {
    let sandbox;
    let server;
    before(async () => {
      // 10 entry writes of 500, each 400 ms late: the import takes 4 s or more.
      sandbox = await startSandbox('e2e-demo-token', ['--faults', 'seed=1,latency=400ms,ops=writeWorldbookDocument']);
      server = await serverFor(transport, { args: ['--api-host', sandbox.apiHost, ...(transport === 'http' ? ['--auth', 'none'] : [])],
        env: { CARDWRITER_TOKEN: sandbox.token } });
    });
    after(async () => {
      await server?.stop();
      await sandbox?.stop();
    });

    test('issued again, it ends with exactly one complete worldbook', async () => {
      try {
        await cutAndIssueAgain();
      } catch (err) {
        err.message += server.stderr ? `\nserver log:\n${server.stderr().slice(-3000)}` : '';
        throw err;
      }
    });

    async function cutAndIssueAgain() {
      const args = { source: { json: lorebook(ENTRIES) } };
      const first = await connect(LINE, server);
      const tools = new Map((await first.listTools()).tools.map((t) => [t.name, t]));
      const ac = new AbortController();
      let half;
      const halfway = new Promise((resolve) => { half = resolve; });
      const pending = callTool(LINE, first, 'import_tavern_worldbook', args, {
        signal: ac.signal,
        timeout: 120000,
        onprogress: (p) => { if (p.total && p.progress >= p.total / 2) half(p); },
      });
      pending.catch(() => {});
      const at = await Promise.race([halfway, pending.then((r) => ({ ended: r }))]);
      assert.equal(at.ended, undefined, `the import ended before half-way: ${JSON.stringify(at.ended?.content)}`);
      // The connection is cut: over HTTP the request is aborted; over stdio the host closes the
      // server's pipes, and the server goes with them.
      ac.abort('connection cut');
      await assert.rejects(pending);
      await first.close();

      const second = await connect(LINE, server);
      try {
        const res = await callTool(LINE, second, 'import_tavern_worldbook', args, { timeout: 120000 });
        const sc = assertSuccess(LINE, tools.get('import_tavern_worldbook'), res);
        assert.equal(sc.entryCount, ENTRIES, `the import issued again: ${res.content[0].text}`);
        if (transport === 'http') {
          assert.equal(sc.repeated, true, 'over HTTP the first import finished detached, and the second returns its result');
        }
        const list = (await callTool(LINE, second, 'list_worldbooks', {})).structuredContent.list;
        assert.equal(list.length, 1, `${list.length} worldbooks: ${JSON.stringify(list)}`);
        assert.equal(list[0].worldbookId, sc.worldbookId);
        const wb = (await callTool(LINE, second, 'get_worldbook', { worldbookId: sc.worldbookId })).structuredContent;
        assert.equal(wb.entryCount, ENTRIES, 'the worldbook is not complete, or holds entries twice');
        // Every entry once: a query for the last one finds exactly it.
        const found = (await callTool(LINE, second, 'list_worldbook_entries', { worldbookId: sc.worldbookId, query: `Milestone ${ENTRIES - 1}` })).structuredContent;
        assert.equal(found.entries.filter((e) => e.name === `Milestone ${ENTRIES - 1}`).length, 1);
      } finally {
        await second.close();
      }
    }
  });
}
