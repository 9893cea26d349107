// The Tasks extension (io.modelcontextprotocol/tasks, SEP-2663, issue 33 item 6) through the
// official TypeScript SDK v2 on 2026-07-28 over HTTP. The SDK's Client has no tasks runtime (it
// refuses resultType "task"), so the calls go through its Streamable HTTP transport, which
// derives the 2026-07-28 headers (Mcp-Method, Mcp-Name) from each message as a host's would.
// Two replicas share one Redis: a large import declared by a client that supports the extension
// is answered with a task handle at once, on one replica; the connection that asked is closed;
// the other replica answers tasks/get with the task's state and then its result (the state lives
// in the store). tasks/cancel, a task that is not there, and a client that does not declare the
// extension (an ordinary result) are checked too.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

import { connect, startHTTP, startSandbox } from './lib/harness.mjs';
import { need, startRedis } from './lib/cluster.mjs';

const EXT = 'io.modelcontextprotocol/tasks';
const ENTRIES = 3000;

function lorebook(n, name) {
  const entries = {};
  for (let i = 0; i < n; i++) entries[i] = { uid: i, key: [`k${i}`], content: `Entry ${i} of ${name}.`, comment: `Entry ${i}` };
  return { name, entries };
}

/** A 2026-07-28 request's _meta, declaring the Tasks extension when tasks is true. */
function meta(tasks) {
  return {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': { name: 'e2e-tasks', version: '1' },
    'io.modelcontextprotocol/clientCapabilities': tasks ? { extensions: { [EXT]: {} } } : {},
  };
}

/** A connection of the SDK's transport to url: request(method, params) resolves to the response. */
async function open(url) {
  const t = new StreamableHTTPClientTransport(new URL(url));
  const waiting = new Map();
  let next = 1;
  t.onmessage = (m) => {
    if (m.id !== undefined && waiting.has(m.id)) {
      waiting.get(m.id)(m);
      waiting.delete(m.id);
    }
  };
  await t.start();
  return {
    request(method, params, tasks = true) {
      const id = next++;
      const answer = new Promise((resolve) => waiting.set(id, resolve));
      return t.send({ jsonrpc: '2.0', id, method, params: { ...params, _meta: meta(tasks) } }).then(() => answer);
    },
    close: () => t.close(),
  };
}

describe('SDK v2 (2026-07-28) over HTTP: imports and exports as Tasks, state in the shared store', () => {
  const redisBin = need('redis-server', 'redis-server');
  let sandbox, redis, a, b;
  before(async () => {
    if (redisBin.skip) return;
    // Entry writes 300 ms late: the import is still working when the handle comes back.
    sandbox = await startSandbox('e2e-demo-token', ['--faults', 'seed=1,latency=300ms,ops=writeWorldbookDocument']);
    redis = await startRedis(redisBin.path);
    const args = ['--api-host', sandbox.apiHost, '--auth', 'none', '--store', redis.url];
    const env = { CARDWRITER_TOKEN: sandbox.token, CARDWRITER_STATE_KEY: randomBytes(32).toString('base64') };
    a = await startHTTP(args, env);
    b = await startHTTP(args, env);
  });
  after(async () => {
    await a?.stop();
    await b?.stop();
    await redis?.stop();
    await sandbox?.stop();
  });

  test('the server declares the extension', { skip: redisBin.skip }, async () => {
    const client = await connect('v2m', { transport: 'http', url: a.url });
    try {
      assert.deepEqual(client.getServerCapabilities()?.extensions?.[EXT], {});
    } finally {
      await client.close();
    }
  });

  test('a large import returns a task at once; another replica, on another connection, answers for it until its result', { skip: redisBin.skip }, async () => {
    const first = await open(a.url);
    const started = Date.now();
    const created = await first.request('tools/call', { name: 'import_tavern_worldbook', arguments: { source: { json: lorebook(ENTRIES, 'Task Road') } } });
    await first.close(); // the connection that asked is gone
    const handle = created.result;
    assert.equal(handle?.resultType, 'task', JSON.stringify(created));
    assert.equal(handle.status, 'working');
    assert.match(handle.taskId, /^[0-9a-f]{32}$/);
    assert.equal(typeof handle.createdAt, 'string');
    assert.ok(handle.ttlMs > 0 && handle.pollIntervalMs > 0);

    const other = await open(b.url);
    try {
      const seen = [];
      let task;
      for (;;) {
        const got = await other.request('tasks/get', { taskId: handle.taskId });
        assert.ok(got.result, JSON.stringify(got));
        task = got.result;
        assert.equal(task.resultType, 'complete');
        seen.push(task.status);
        if (task.status !== 'working') break;
        assert.ok(Date.now() - started < 120000, 'the task did not end in 2 minutes');
        await new Promise((r) => setTimeout(r, task.pollIntervalMs));
      }
      assert.equal(seen[0], 'working', `the task was polled while working: ${seen}`);
      assert.equal(task.status, 'completed', JSON.stringify(task));
      assert.equal(task.result.isError, undefined, JSON.stringify(task.result));
      assert.equal(task.result.structuredContent.entryCount, ENTRIES);
      const wbs = await other.request('tools/call', { name: 'list_worldbooks', arguments: {} });
      assert.equal(wbs.result.structuredContent.list.filter((w) => w.name === 'Task Road').length, 1);

      // The export of that worldbook, as a task too, on the first replica.
      const exp = await other.request('tools/call', { name: 'export_tavern_worldbook', arguments: { worldbookId: task.result.structuredContent.worldbookId } });
      assert.equal(exp.result?.resultType, 'task', JSON.stringify(exp));
      let exported;
      do {
        await new Promise((r) => setTimeout(r, 100));
        exported = (await other.request('tasks/get', { taskId: exp.result.taskId })).result;
      } while (exported.status === 'working');
      assert.equal(exported.status, 'completed', JSON.stringify(exported).slice(0, 500));
      assert.ok(!exported.result.isError, JSON.stringify(exported.result).slice(0, 500));

      // Cancelling a task that ended is acknowledged and changes nothing.
      const cancel = await other.request('tasks/cancel', { taskId: handle.taskId });
      assert.deepEqual(cancel.result, { resultType: 'complete' });
      assert.equal((await other.request('tasks/get', { taskId: handle.taskId })).result.status, 'completed');
    } finally {
      await other.close();
    }
  });

  test('tasks/cancel on a working task; an unknown task is Invalid params', { skip: redisBin.skip }, async () => {
    const c = await open(a.url);
    try {
      const created = await c.request('tools/call', { name: 'import_tavern_worldbook', arguments: { source: { json: lorebook(ENTRIES, 'Cancelled Road') } } });
      const { taskId } = created.result;
      assert.deepEqual((await c.request('tasks/cancel', { taskId })).result, { resultType: 'complete' });
      const task = (await c.request('tasks/get', { taskId })).result;
      assert.equal(task.status, 'cancelled');
      assert.match(task.statusMessage, /idempotencyKey/);
      const unknown = await c.request('tasks/get', { taskId: '0'.repeat(32) });
      assert.equal(unknown.error?.code, -32602, JSON.stringify(unknown));
    } finally {
      await c.close();
    }
  });

  test('a client that does not declare the extension gets the ordinary result', { skip: redisBin.skip }, async () => {
    const c = await open(b.url);
    try {
      const res = await c.request('tools/call', { name: 'import_tavern_worldbook', arguments: { source: { json: lorebook(20, 'Plain Road') } } }, false);
      assert.equal(res.result?.resultType, 'complete', JSON.stringify(res).slice(0, 500));
      assert.equal(res.result.structuredContent.entryCount, 20);
    } finally {
      await c.close();
    }
  });
});
