// The task suite that defines done: the author tasks of lib/authortasks.mjs, each asked in the
// author's words of Claude Code (headless -p, its default tool search) and Gemini CLI, over stdio
// (the README's line for the card service, after `cardwriter-mcp login`) and over streamable HTTP
// (Gemini CLI: proxy mode, the host signing in by itself through the server's OAuth with the
// browser stand-in on the pages; Claude Code, which signs in only interactively: passthrough
// with the card service's token in a header), each host driven by the stand-in model playing the
// task's steps. A task passes when the end state, read through the tools by a client of the
// test's own, is right. Each run is measured: model turns, calls, the tokens (cl100k_base) of the
// server's tool definitions in a model request and of the results as the host passed them; the
// README's author-tasks table states them (UPDATE_README=1 rewrites it). A task that needs a
// feature the server under test lacks (FEATURES) runs as a todo, naming the feature.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';

import { callTool, connect, startHTTP, startSandbox } from './lib/harness.mjs';
import { ScriptedProvider, connectSignedIn } from './lib/browser.mjs';
import { HOSTS, hostHome, login, missing, printed } from './lib/hosts.mjs';
import { startModel } from './lib/standin-model.mjs';
import { player } from './lib/script.mjs';
import { FEATURES, TASKS, toolsOf } from './lib/authortasks.mjs';
import { steady, tokens } from './lib/tasks.mjs';
import { readmeSection } from './lib/readme.mjs';

const CLAUDE = HOSTS.find((h) => h.name === 'Claude Code');
const GEMINI = HOSTS.find((h) => h.name === 'Gemini CLI');
const TOKEN = 'e2e-author-token';
// AUTHOR_TASKS=regexp runs only the tasks whose "variant/task" matches (the README check is then skipped).
const ONLY = new RegExp(process.env.AUTHOR_TASKS ?? '');

/** A client of the test's own, for setting up and checking: call() returns structuredContent. */
function service(client) {
  return {
    client,
    async call(name, args) {
      const res = await callTool('v1', client, name, args);
      assert.notEqual(res.isError, true, `${name}: ${JSON.stringify(res.content).slice(0, 500)}`);
      return res.structuredContent;
    },
    close: () => client.close(),
  };
}

/**
 * The ways a host reaches the server: start(h, sandbox) starts what the host connects to and
 * configures the host; svc(h) connects a client of the test's own to the same server as the
 * same author (the same revisions); bearer is what that client holds.
 */
const TRANSPORTS = {
  stdio: {
    async start(host, h, sandbox) {
      await login(h, sandbox.apiHost);
      const name = await host.configure(h, 'stdio', undefined, { apiHost: sandbox.apiHost });
      return { name, stop: async () => {} };
    },
    async svc(h, sandbox) {
      return service(await connect('v1', { transport: 'stdio', args: ['stdio'],
        env: { CARDWRITER_API_HOST: sandbox.apiHost, XDG_CONFIG_HOME: join(h.home, '.config'), HOME: h.home } }));
    },
  },
  http: {
    async start(host, h, sandbox) {
      const state = mkdtempSync(join(tmpdir(), 'cw-author-state-'));
      const mode = host.signsIn ? 'proxy' : 'passthrough';
      // No per-user rate limit: the setups write faster than an author does.
      const server = await startHTTP(['--api-host', sandbox.apiHost, '--auth', mode, '--state-dir', state, '--user-rate', '0']);
      const name = await host.configure(h, 'http', server.url, host.signsIn ? {} : { token: sandbox.token });
      return { name, url: server.url, mode, stop: async () => {
        await server.stop();
        rmSync(state, { recursive: true, force: true });
      } };
    },
    async svc(h, sandbox, server) {
      const client = new Client({ name: 'author-tasks-check', version: '1.0.0' });
      if (server.mode === 'passthrough') {
        await client.connect(new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers: { Authorization: `Bearer ${sandbox.token}` } } }));
      } else {
        const provider = new ScriptedProvider('author-tasks-check');
        await connectSignedIn(client, () => new StreamableHTTPClientTransport(new URL(server.url), { authProvider: provider }), provider);
      }
      return service(client);
    },
  },
};

/** The tools the server lists (for the features it has), from a sandbox stdio server. */
async function serverTools() {
  const client = await connect('v1', { transport: 'stdio', args: ['stdio', '--sandbox'], env: {} });
  try {
    return Object.fromEntries((await client.listTools()).tools.map((t) => [t.name, t]));
  } finally {
    await client.close();
  }
}

const TOOLS = await serverTools();
/** The features a task lacks in a host and transport: '' when none. */
function lacking(task, host, transport) {
  const needs = [...(task.needs?.all ?? []), ...(task.needs?.[host.name] ?? []), ...(task.needs?.[transport] ?? [])];
  const limit = task.limits?.[`${host.name}, ${transport}`];
  return [...needs.filter((f) => !FEATURES[f].has(TOOLS)).map((f) => `needs ${FEATURES[f].by}`), ...(limit ? [limit] : [])].join('; ');
}

const absent = new Map([CLAUDE, GEMINI].map((host) => [host, missing(host)]));
if (process.env.CI === 'true') {
  for (const why of absent.values()) {
    if (why) throw new Error(`${why}: the task suite needs it under CI`);
  }
}

/** What a task's run cost, by variant name and task id. */
const figures = new Map();

/** The figures of one run: turns, calls, and tokens of definitions and results as the host sent them. */
function measure(model, from, listedFrom, state, h) {
  const convs = model.conversations.slice(from);
  const last = convs.at(-1);
  const names = new Map();
  // What varies from run to run, made steady: the home folder, ports, export links'
  // random names, cursors, versions and confirmation tokens (also as Gemini CLI passes them,
  // inside escaped JSON), signatures, ids and times, each replaced by as many fixed characters.
  const fixed = (v) => {
    if (!names.has(v)) names.set(v, createHash('sha256').update(`steady ${names.size}`).digest('hex'));
    return names.get(v);
  };
  const same = (v) => {
    let out = '';
    while (out.length < v.length) out += fixed(v);
    return out.slice(0, v.length);
  };
  const clean = (s) => steady(s.split(h.home).join('/home/author').replace(/127\.0\.0\.1:\d+/g, '127.0.0.1:8080')
    .replace(/https?:\/\/[^\s"\\]+/g, (u) => u.replace(/[?#].*$/, '?signed'))
    .replace(/(\/download\/)([^\s"\\?#]+)/g, (_, k, v) => k + same(v))
    .replace(/\b[0-9a-f]{32}\b/g, (v) => fixed(v).slice(0, 32))
    .replace(/(\\?"(?:nextCursor|cursor|version|ifVersion|confirmationToken)\\?":\s*\\?")([A-Za-z0-9_+/=.-]+)/g, (_, k, v) => k + same(v))
    // confirmation tokens and hashes wherever else they stand (in a text)
    .replace(/[A-Za-z0-9_-]{40,}(?:\.[A-Za-z0-9_-]+)?/g, same), names);
  const results = (last?.all ?? []).filter((r) => !r.host).reduce((n, r) => n + tokens(clean(r.shown)), 0);
  return {
    turns: convs.length + (model.listed.length - listedFrom),
    calls: state.calls.length,
    definitions: last ? tokens(`[${last.definitions.join(',')}]`) : 0,
    results,
  };
}

const VARIANTS = [
  { host: CLAUDE, transport: 'stdio' },
  { host: CLAUDE, transport: 'http' },
  { host: GEMINI, transport: 'stdio' },
  { host: GEMINI, transport: 'http' },
].map((v) => ({ ...v, name: `${v.host.name} over ${v.transport}` }));

// The variants run two at a time (each its own sandbox, server, model and home); the tasks of
// one run one after another, as one author's.
describe('author tasks', { concurrency: 2 }, () => {
  for (const v of VARIANTS) {
    describe(v.name, { skip: absent.get(v.host) || false, concurrency: 1 }, () => {
      let sandbox;
      let model;
      let h;
      let server;
      let svc;
      let play;
      let current;
      before(async () => {
        sandbox = await startSandbox(TOKEN);
        model = await startModel({ marker: 'whoami', script: (conv) => play.next(conv), load: (names) => names.filter((n) => current.includes(n)) });
        h = hostHome(v.host, model);
        server = await TRANSPORTS[v.transport].start(v.host, h, sandbox);
        svc = await TRANSPORTS[v.transport].svc(h, sandbox, server);
      });
      after(async () => {
        await svc?.close();
        await server?.stop();
        await model?.close();
        await sandbox?.stop();
        h?.remove();
      });

      for (const task of TASKS.filter((t) => ONLY.test(`${v.name}/${t.id}`))) {
        const todo = lacking(task, v.host, v.transport);
        it(task.id, { todo: todo || false }, async () => {
          const facts = { home: h.home, ...(await task.setup({ svc, home: h.home })) };
          const other = task.other ? task.other(svc) : undefined;
          play = player(task.steps, v.host, { other });
          current = toolsOf(task.steps);
          const from = model.conversations.length;
          const listedFrom = model.listed.length;
          const r = await v.host.prompt(h, server.name, task.prompt(facts));
          const fail = (what) => `${v.name}, ${task.id}: ${what}\n${printed(r)}\nother model requests: ${model.others.slice(-5).join('\n')}`;
          const convs = model.conversations.slice(from);
          assert.ok(convs.length > 0, fail('the host never asked the stand-in model with the server\'s tools'));
          for (const c of convs) assert.equal(c.error, undefined, fail(`the stand-in model stopped: ${c.error}`));
          assert.equal(play.state.done, true, fail('the task did not get to its last words'));
          assert.equal(r.code, 0, fail('the host failed'));
          const said = v.host.said(r);
          assert.ok(said.includes(play.state.said.slice(0, 40)), fail('the host did not print the model\'s last words'));
          const fetchAsAuthor = async (url) => {
            const res = await fetch(url);
            assert.equal(res.status, 200, `GET ${url}: ${res.status}`);
            return res.text();
          };
          await task.verify({ svc, facts, said, fetchAsAuthor });
          figures.set(`${v.name}/${task.id}`, measure(model, from, listedFrom, play.state, h));
        });
      }
    });
  }
});

const n = (x) => x.toLocaleString('en-US');
const BEGIN = '<!-- author-tasks:begin -->';
const END = '<!-- author-tasks:end -->';

/** The README's table: a row per task, a column per host and transport. */
function table() {
  const head = VARIANTS.map((v) => `${v.host.name}, ${v.transport}`);
  const rows = TASKS.map((task) => {
    const cells = VARIANTS.map((v) => {
      const f = figures.get(`${v.name}/${task.id}`);
      // A task that lacks a feature is stated as such, even where it got through without it.
      if (f && !lacking(task, v.host, v.transport)) return `${f.turns} / ${f.calls} / ${n(f.definitions)} / **${n(f.results)}**`;
      const why = lacking(task, v.host, v.transport);
      if (!why) return 'fails';
      const needs = Object.keys(FEATURES).filter((k) => why.includes(FEATURES[k].by)).map((k) => `\`${k}\``);
      return needs.length ? `needs ${needs.join(', ')}` : 'cannot (see the suite)';
    });
    return `| ${task.title} | ${cells.join(' | ')} |`;
  });
  return [
    BEGIN,
    `| Author task (\`e2e/authortasks.test.mjs\`): turns / calls / definition tokens per request / **result tokens** | ${head.join(' | ')} |`,
    `|---|${VARIANTS.map(() => '---').join('|')}|`,
    ...rows,
    END,
  ].join('\n');
}

it('the README states what each task cost in each host', { skip: [...absent.values()].find(Boolean) || (process.env.AUTHOR_TASKS ? 'AUTHOR_TASKS runs only some' : false) }, () => {
  readmeSection(BEGIN, END, table(), { rerun: 'UPDATE_README=1 bash e2e/run authortasks.test.mjs' });
});
