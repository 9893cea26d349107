// The hosts people run: Claude Code and Gemini CLI (from npm, pinned in package.json), each
// configured with the README's own lines ("Connect a host"), over stdio and streamable HTTP, in
// a home directory of their own. Each must connect and offer its model every tool (Claude Code
// both with its tool search, its default, and without); then, driven by a scripted stand-in for
// the model on loopback (lib/standin-model.mjs), the host calls whoami, create_card and
// set_opening_lines (a write, with the arguments the host adds on its own: Gemini's
// wait_for_previous) and passes each result back, where the stand-in checks it before the next
// call. Skipped when a host is not installed, failing under CI=true.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { BIN, callTool, cleanEnv, connect, serverFor } from './lib/harness.mjs';
import { readmeBlock } from './lib/readme.mjs';
import { startModel } from './lib/standin-model.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const modules = join(here, 'node_modules');
// A host run that takes longer than this has hung: it is killed and the test fails.
const RUN_MS = 120000;
// The README's example HTTP endpoint, replaced by the test server's.
const README_URL = 'http://127.0.0.1:8080/mcp';
const WELCOME = '"You\'re late, pilot," the captain says.';

/** The environment of a host run: nothing of the user's (home, keys, model settings). */
function hostEnv(home, extra) {
  const env = {};
  for (const [k, v] of Object.entries(cleanEnv())) {
    if (!/^(ANTHROPIC_|CLAUDE_|GEMINI_|GOOGLE_|XDG_)|_PROXY$/i.test(k)) env[k] = v;
  }
  // Anything a host sends beyond loopback goes to a proxy that is not there, and fails at once.
  const offline = { HTTP_PROXY: 'http://127.0.0.1:9', HTTPS_PROXY: 'http://127.0.0.1:9', NO_PROXY: '127.0.0.1,localhost' };
  return { ...env, ...offline, HOME: home, XDG_CONFIG_HOME: join(home, '.config'), NO_COLOR: '1', ...extra };
}

/**
 * Runs a host command in home (its own process group, killed whole after RUN_MS); resolves with
 * its exit code, stdout and stderr.
 */
function run(command, args, { env, cwd }) {
  return new Promise((resolve) => {
    const p = spawn(command, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      process.kill(-p.pid, 'SIGKILL');
    }, RUN_MS);
    p.on('error', (err) => {
      clearTimeout(timer);
      resolve({ code: -1, stdout, stderr: `${stderr}\n${err.message}`, timedOut });
    });
    p.on('close', (code) => {
      clearTimeout(timer);
      // Whatever the host left running (a stdio server it did not stop) goes with it.
      try {
        process.kill(-p.pid, 'SIGKILL');
      } catch {
        // the group is gone
      }
      resolve({ code, stdout, stderr, timedOut });
    });
  });
}

/** The tail of a text, for a failure message. */
function tail(s, n = 3000) {
  return s.length > n ? `...${s.slice(-n)}` : s;
}

/** What a host run printed, for a failure message. */
function printed(r) {
  return `${r.timedOut ? `killed after ${RUN_MS} ms\n` : ''}exit ${r.code}\n--- stdout (tail) ---\n${tail(r.stdout)}\n--- stderr (tail) ---\n${tail(r.stderr)}`;
}

/**
 * A host: how to find it, configure it from the README for one server, check that it connects,
 * and run one prompt non-interactively against the stand-in model.
 */
const claudeCode = {
  name: 'Claude Code',
  package: '@anthropic-ai/claude-code',
  command: join(modules, '.bin', 'claude'),
  prefix: (server) => `mcp__${server}__`,
  // The arguments the host declares on every tool and passes on, and the values the model
  // sends: Claude Code adds none.
  added: {},
  env: (model) => ({
    ANTHROPIC_BASE_URL: model.url,
    ANTHROPIC_API_KEY: 'sk-ant-standin',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_AUTOUPDATER: '1',
  }),
  // Its default: the tools listed to the model by name only, loaded with its ToolSearch tool.
  toolSearch: true,
  /** The README's `claude mcp add` line for the transport, run as written. */
  async configure(h, transport, url) {
    const line = readmeBlock('claude-code').split('\n').map((l) => l.replace(/#.*/, '').trim())
      .find((l) => (transport === 'http' ? l.includes('--transport http') : /\sstdio\b/.test(l) && !l.includes('--env')));
    assert.ok(line, `README's Claude Code block has no ${transport} line`);
    const args = line.split(/\s+/).slice(1).map((a) => (a === 'cardwriter-mcp' ? BIN : a === README_URL ? url : a));
    const name = args[args.indexOf('add') + (transport === 'http' ? 3 : 1)];
    const r = await run(this.command, args, { env: h.env, cwd: h.home });
    assert.equal(r.code, 0, `${this.name}: ${line} failed:\n${printed(r)}`);
    return name;
  },
  async connected(h, name) {
    const r = await run(this.command, ['mcp', 'list'], { env: h.env, cwd: h.home });
    const row = r.stdout.split('\n').find((l) => l.startsWith(`${name}:`));
    assert.ok(row && /Connected/.test(row) && !/Failed|Needs/.test(row), `${this.name}: claude mcp list does not show ${name} connected:\n${printed(r)}`);
  },
  prompt(h, name) {
    return run(this.command, ['-p', 'Make me a card for Captain Mira Vale.', '--allowedTools', `mcp__${name}`, '--output-format', 'json'], { env: h.env, cwd: h.home });
  },
};

/** The hosts, Claude Code twice: with its tool search (its default) and without. */
const HOSTS = [
  claudeCode,
  // Every tool's schema in the model's first request (tool search off, as with a model or a
  // gateway without it).
  { ...claudeCode, name: 'Claude Code without tool search', toolSearch: false, env: (model) => ({ ...claudeCode.env(model), ENABLE_TOOL_SEARCH: 'false' }) },
  {
    name: 'Gemini CLI',
    package: '@google/gemini-cli',
    command: process.execPath,
    script: join(modules, '@google', 'gemini-cli', 'bundle', 'gemini.js'),
    prefix: (server) => `mcp_${server}_`,
    // Gemini CLI declares wait_for_previous on every tool and passes it on to the server.
    added: { wait_for_previous: true },
    env: (model) => ({ GOOGLE_GEMINI_BASE_URL: model.url, GEMINI_API_KEY: 'standin' }),
    /** The README's settings.json entry for the transport, as the user's settings. */
    async configure(h, transport, url) {
      const servers = JSON.parse(readmeBlock('gemini-cli')).mcpServers;
      const name = Object.keys(servers).find((n) => (transport === 'http' ? servers[n].url : servers[n].command));
      assert.ok(name, `README's Gemini CLI block has no ${transport} server`);
      const entry = { ...servers[name] };
      if (entry.command === 'cardwriter-mcp') entry.command = BIN;
      if (entry.url === README_URL) entry.url = url;
      mkdirSync(join(h.home, '.gemini'), { recursive: true });
      writeFileSync(join(h.home, '.gemini', 'settings.json'), JSON.stringify({
        mcpServers: { [name]: entry },
        // An API key, read from GEMINI_API_KEY (the model's address from GOOGLE_GEMINI_BASE_URL).
        security: { auth: { selectedType: 'gemini-api-key' } },
        privacy: { usageStatisticsEnabled: false },
        general: { disableAutoUpdate: true, disableUpdateNag: true },
      }, null, 2));
      // The folder trusted, as the trust dialog records it: MCP servers run only in trusted folders.
      writeFileSync(join(h.home, '.gemini', 'trustedFolders.json'), JSON.stringify({ [h.home]: 'TRUST_FOLDER' }));
      return name;
    },
    async connected(h, name) {
      const r = await run(this.command, [this.script, 'mcp', 'list'], { env: h.env, cwd: h.home });
      const out = r.stdout + r.stderr;
      const row = out.split('\n').find((l) => l.includes(`${name}:`) || l.includes(`${name} `));
      assert.ok(row && /Connected/.test(row) && !/Disconnected/.test(row), `Gemini CLI: gemini mcp list does not show ${name} connected:\n${printed(r)}`);
    },
    prompt(h, name) {
      // The server's tools allowed without a confirmation, which a run without a terminal cannot
      // ask for (a rule of Gemini's policy engine, as --allowedTools for Claude Code).
      const policy = join(h.home, 'cardwriter.toml');
      writeFileSync(policy, `[[rule]]\nmcpName = ${JSON.stringify(name)}\ntoolName = "*"\ndecision = "allow"\npriority = 100\n`);
      // A model named on the command line: Gemini CLI then asks no classifier which model to use.
      return run(this.command, [this.script, '-p', 'Make me a card for Captain Mira Vale.', '-m', 'gemini-2.5-flash', '--policy', policy, '--output-format', 'text'], { env: h.env, cwd: h.home });
    },
  },
];

/** Whether a host is installed and runs here: '' when it does, else why not. */
function missing(host) {
  if (!existsSync(join(modules, ...host.package.split('/'), 'package.json'))) return `${host.package} is not installed in e2e/node_modules (e2e/run installs it)`;
  const home = mkdtempSync(join(tmpdir(), 'cardwriter-agent-'));
  try {
    const args = host.script ? [host.script, '--version'] : ['--version'];
    const r = spawnSync(host.command, args, { env: hostEnv(home, {}), cwd: home, timeout: 60000, encoding: 'utf8' });
    return r.status === 0 ? '' : `${host.name} does not run here (${host.command} --version: exit ${r.status}, ${r.error?.message ?? ''} ${tail(r.stderr ?? '', 500)})`;
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/**
 * The model's script: whoami; create_card once whoami's answer names the demo user; then
 * set_opening_lines on the new card (with the host's own arguments); then a final text. Each turn
 * checks the result the host passed back and throws (which stops the run) when it is wrong.
 */
function script(added) {
  const result = (conv, i, tool, want) => {
    const r = conv.results[i];
    assert.ok(r, `no result of ${tool} came back`);
    assert.equal(r.name, tool, `result ${i} is of ${r.name}, want ${tool}`);
    assert.ok(!r.isError && !/isError|"error"/.test(r.text), `${tool} failed: ${r.text}`);
    for (const w of want) assert.ok(r.text.includes(w), `${tool}'s result lacks ${w}: ${r.text}`);
    return r.text;
  };
  const state = {};
  return {
    state,
    play(conv) {
      switch (conv.results.length) {
        case 0:
          return { calls: [{ tool: 'whoami', args: {} }] };
        case 1:
          result(conv, 0, 'whoami', ['Demo Author', 'u_demo']);
          return { calls: [{ tool: 'create_card', args: { roleName: 'Captain Mira Vale' } }] };
        case 2: {
          const text = result(conv, 1, 'create_card', ['roleId']);
          state.roleId = text.match(/r_[0-9a-f]{8,}/)?.[0];
          assert.ok(state.roleId, `create_card's result has no roleId: ${text}`);
          return { calls: [{ tool: 'set_opening_lines', args: { roleId: state.roleId, roleWelcome: WELCOME, ...added } }] };
        }
        case 3:
          result(conv, 2, 'set_opening_lines', [state.roleId, 'rv_']);
          state.done = true;
          return { text: 'Captain Mira Vale is ready to write.' };
        default:
          throw new Error(`a request after the last turn, with ${conv.results.length} results`);
      }
    },
  };
}

const absent = new Map(HOSTS.map((host) => [host, missing(host)]));
if (process.env.CI === 'true') {
  for (const why of absent.values()) {
    if (why) throw new Error(`${why}: the hosts suite needs it under CI`);
  }
}

for (const host of HOSTS) {
  describe(host.name, { skip: absent.get(host) || false }, () => {
    let tools;
    before(async () => {
      // Every tool the server lists, as the SDK lists them.
      const server = await serverFor('stdio');
      const client = await connect('v1', server);
      tools = (await client.listTools()).tools;
      await client.close();
    });

    for (const transport of ['stdio', 'http']) {
      describe(`over ${transport}`, () => {
        let server;
        let model;
        let h;
        let play;
        before(async () => {
          server = await serverFor(transport);
          play = script(host.added);
          model = await startModel({ marker: 'whoami', script: (conv) => play.play(conv) });
          const home = mkdtempSync(join(tmpdir(), 'cardwriter-agent-'));
          h = { home, env: hostEnv(home, host.env(model)) };
        });
        after(async () => {
          await model?.close();
          await server?.stop();
          if (h) rmSync(h.home, { recursive: true, force: true });
        });

        let name;
        it('is configured as the README says and connects', async () => {
          name = await host.configure(h, transport, server.url);
          await host.connected(h, name);
        });

        it('offers the model every tool and calls whoami, create_card and set_opening_lines through the server', async (t) => {
          if (!name) return t.skip('not configured');
          const r = await host.prompt(h, name);
          const fail = (what) => `${host.name} over ${transport}: ${what}\n${printed(r)}\nother model requests: ${model.others.join('\n')}`;
          assert.ok(model.conversations.length > 0, fail('the host never asked the stand-in model with the server\'s tools'));
          const first = model.conversations[0];
          assert.equal(first.prefix, host.prefix(name), fail('tool names'));
          const names = tools.map((x) => x.name).sort();
          assert.deepEqual([...first.offered].sort(), names, fail('the tools offered to the model are not the tools the server lists'));
          if (host.toolSearch) {
            assert.equal(model.listed.length, 1, fail('the host did not list the tools by name for its ToolSearch'));
            assert.deepEqual([...model.listed[0]].sort(), names, fail('the tools listed by name are not the tools the server lists'));
          } else {
            assert.equal(model.listed.length, 0, fail('the host listed the tools by name only'));
          }
          for (const conv of model.conversations) assert.equal(conv.error, undefined, fail(`the stand-in model stopped: ${conv.error}`));
          // The arguments the host declares to its model beyond the server's are the ones the
          // write is sent with: when a host adds another, or stops adding one, this says so.
          const own = Object.keys(tools.find((x) => x.name === 'set_opening_lines').inputSchema.properties);
          const declared = Object.keys(first.schemas.set_opening_lines?.properties ?? {});
          assert.deepEqual(declared.filter((k) => !own.includes(k)).sort(), Object.keys(host.added).sort(), fail('the arguments the host adds to set_opening_lines'));
          assert.equal(play.state.done, true, fail('the host did not get through the three calls'));
          assert.equal(r.code, 0, fail('the host failed'));
          assert.match(r.stdout, /Captain Mira Vale is ready to write\./, fail('the host did not print the model\'s final text'));
        });

        if (transport === 'http') {
          it('left the write in the service', async (t) => {
            if (!play.state.roleId) return t.skip('no card was made');
            const client = await connect('v1', server);
            const res = await callTool('v1', client, 'get_card', { roleId: play.state.roleId });
            await client.close();
            assert.notEqual(res.isError, true, JSON.stringify(res.content));
            assert.equal(res.structuredContent.roleWelcome, WELCOME, `${host.name}: the card's first message is not the one set through it`);
          });
        }
      });
    }
  });
}
