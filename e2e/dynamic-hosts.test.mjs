// --dynamic-toolsets in the hosts people run (issue 33 item 1): Claude Code and Gemini CLI (from
// npm, pinned in package.json) start cardwriter-mcp over stdio with --dynamic-toolsets, and the
// scripted stand-in model (lib/standin-model.mjs) calls enable_toolset for worldbook, then looks
// at the tools the host offers it on its next turn. The server sends
// notifications/tools/list_changed; a host that re-lists its tools offers the worldbook tools.
// Neither host does (Claude Code 2.1.332, Gemini CLI 0.61.0: they keep the tools they read at
// the start of the run), so this test holds what each host does (TAKES below): when a host starts
// taking new tools, it fails, and the README's and enable_toolset's advice must change with it.
// It also holds that advice true: the result the model reads names the --toolsets line to use.
// Skipped when a host is not installed, failing under CI=true.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { runJoined } from './lib/hosts.mjs';
import { BIN, cleanEnv } from './lib/harness.mjs';
import { startModel } from './lib/standin-model.mjs';

const modules = join(dirname(fileURLToPath(import.meta.url)), 'node_modules');
const SERVER = ['stdio', '--sandbox', '--dynamic-toolsets'];
const PROMPT = 'Build a worldbook for the Old Road.';

/** Whether each host offers the model the tools enable_toolset added, on the next turn. */
const TAKES = { 'Claude Code': false, 'Gemini CLI': false };

/** The environment of a host run: nothing of the user's, nothing beyond loopback. */
function hostEnv(home, extra) {
  const env = Object.fromEntries(Object.entries(cleanEnv()).filter(([k]) => !/^(ANTHROPIC_|CLAUDE_|GEMINI_|GOOGLE_|XDG_)|_PROXY$/i.test(k)));
  return { ...env, HTTP_PROXY: 'http://127.0.0.1:9', HTTPS_PROXY: 'http://127.0.0.1:9', NO_PROXY: '127.0.0.1,localhost',
    HOME: home, XDG_CONFIG_HOME: join(home, '.config'), NO_COLOR: '1', ...extra };
}


const HOSTS = [
  {
    name: 'Claude Code',
    package: '@anthropic-ai/claude-code',
    command: join(modules, '.bin', 'claude'),
    args: [],
    env: (model) => ({ ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'sk-ant-standin', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_AUTOUPDATER: '1', ENABLE_TOOL_SEARCH: 'false' }),
    async configure(h) {
      const r = await runJoined(this.command, ['mcp', 'add', 'cardwriter', '--', BIN, ...SERVER], { env: h.env, cwd: h.home });
      assert.equal(r.code, 0, r.out);
    },
    prompt(h) {
      return runJoined(this.command, ['-p', PROMPT, '--allowedTools', 'mcp__cardwriter', '--output-format', 'json'], { env: h.env, cwd: h.home });
    },
  },
  {
    name: 'Gemini CLI',
    package: '@google/gemini-cli',
    command: process.execPath,
    args: [join(modules, '@google', 'gemini-cli', 'bundle', 'gemini.js')],
    env: (model) => ({ GOOGLE_GEMINI_BASE_URL: model.url, GEMINI_API_KEY: 'standin' }),
    async configure(h) {
      mkdirSync(join(h.home, '.gemini'), { recursive: true });
      writeFileSync(join(h.home, '.gemini', 'settings.json'), JSON.stringify({
        mcpServers: { cardwriter: { command: BIN, args: SERVER } },
        security: { auth: { selectedType: 'gemini-api-key' } },
        privacy: { usageStatisticsEnabled: false },
        general: { disableAutoUpdate: true, disableUpdateNag: true },
      }));
      writeFileSync(join(h.home, '.gemini', 'trustedFolders.json'), JSON.stringify({ [h.home]: 'TRUST_FOLDER' }));
    },
    prompt(h) {
      const policy = join(h.home, 'cardwriter.toml');
      writeFileSync(policy, '[[rule]]\nmcpName = "cardwriter"\ntoolName = "*"\ndecision = "allow"\npriority = 100\n');
      return runJoined(this.command, [...this.args, '-p', PROMPT, '-m', 'gemini-2.5-flash', '--policy', policy, '--output-format', 'text'], { env: h.env, cwd: h.home });
    },
  },
];

/** Why a host cannot run here, or ''. */
function missing(host) {
  if (!existsSync(join(modules, ...host.package.split('/'), 'package.json'))) return `${host.package} is not installed in e2e/node_modules (e2e/run installs it)`;
  const r = spawnSync(host.command, [...host.args, '--version'], { env: hostEnv(tmpdir(), {}), timeout: 60000, encoding: 'utf8' });
  return r.status === 0 ? '' : `${host.name} does not run here (--version: exit ${r.status})`;
}

for (const host of HOSTS) {
  const why = missing(host);
  if (why && process.env.CI === 'true') throw new Error(`${why}: the hosts suite needs it under CI`);
  describe(`${host.name} with --dynamic-toolsets over stdio`, { skip: why || false }, () => {
    let model;
    let home;
    after(async () => {
      await model?.close();
      if (home) rmSync(home, { recursive: true, force: true });
    });

    it(TAKES[host.name] ? 'offers the model the tools enable_toolset added, on its next turn'
      : 'does not offer the tools enable_toolset added, and the result tells the model what to use instead', async () => {
      const turns = [];
      model = await startModel({
        marker: 'enable_toolset',
        script: (conv) => {
          turns.push(conv);
          if (conv.results.length === 0) return { calls: [{ tool: 'enable_toolset', args: { toolset: 'worldbook' } }] };
          return { text: 'Done.' };
        },
      });
      home = mkdtempSync(join(tmpdir(), 'cardwriter-dynamic-'));
      const h = { home, env: hostEnv(home, host.env(model)) };
      await host.configure(h);
      const r = await host.prompt(h);
      const fail = (what) => `${host.name}: ${what}\nexit ${r.code}\n${r.out.slice(-3000)}\nother model requests: ${model.others.join('\n')}`;
      assert.ok(turns.length >= 2, fail(`the model had ${turns.length} turns, want 2`));
      assert.deepEqual([...turns[0].offered].sort(), ['enable_toolset', 'get_card', 'list_toolsets', 'whoami'], fail('the tools at the start'));
      const enabled = turns[1].results.find((x) => x.name === 'enable_toolset');
      assert.ok(enabled && !enabled.isError, fail('enable_toolset\'s result did not come back'));
      assert.match(enabled.text, /--toolsets cards,worldbook/, fail('enable_toolset\'s result does not name the --toolsets line to use'));
      const offered = turns[1].offered;
      const took = offered.includes('list_worldbooks') && offered.includes('write_worldbook_document');
      assert.equal(took, TAKES[host.name], fail(`on the turn after enable_toolset the host offers: ${offered.join(' ')}`));
    });
  });
}
