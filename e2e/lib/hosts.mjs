// The hosts people run, from npm (pinned in e2e/package.json): Claude Code and Gemini CLI, each
// configured with the README's own lines ("Connect a host") in a home directory of the test's
// own, run headless against a stand-in model (lib/standin-model.mjs). Used by agents.test.mjs
// and authortasks.test.mjs.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { BIN, cleanEnv } from './harness.mjs';
import { readmeBlock } from './readme.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const modules = join(here, '..', 'node_modules');
/** A host run that takes longer than this has hung: it is killed and the test fails. */
export const RUN_MS = 120000;
// The README's example HTTP endpoint and card service, replaced by the test's.
const README_URL = 'http://127.0.0.1:8080/mcp';
const README_API = 'https://api.example.com';

/**
 * The person at the browser, for a host home: an xdg-open on the PATH of the host's runs (where
 * Gemini CLI and `cardwriter-mcp login` open the sign-in page) that walks the pages with
 * lib/browser.mjs's signInAt (sign in as the demo author, Allow) and hands the code to the
 * redirect URI the page was opened for, as a browser does.
 */
function browserStandIn(home) {
  const bin = join(home, '.bin');
  mkdirSync(bin, { recursive: true });
  const script = join(bin, 'xdg-open');
  writeFileSync(script, `#!${process.execPath}
import(${JSON.stringify(join(here, 'browser.mjs'))}).then(async ({ signInAt }) => {
  const url = process.argv[2];
  const redirect = new URL(url).searchParams.get('redirect_uri');
  const back = await signInAt(url, redirect);
  await fetch(back);
}).catch((err) => {
  console.error('browser stand-in:', err.message);
  process.exit(1);
});
`);
  chmodSync(script, 0o755);
  return bin;
}

/** The environment of a host run: nothing of the user's (home, keys, model settings). */
export function hostEnv(home, extra) {
  const env = {};
  for (const [k, v] of Object.entries(cleanEnv())) {
    if (!/^(ANTHROPIC_|CLAUDE_|GEMINI_|GOOGLE_|XDG_)|_PROXY$/i.test(k)) env[k] = v;
  }
  // Anything a host sends beyond loopback goes to a proxy that is not there, and fails at once.
  const offline = { HTTP_PROXY: 'http://127.0.0.1:9', HTTPS_PROXY: 'http://127.0.0.1:9', NO_PROXY: '127.0.0.1,localhost' };
  const path = `${browserStandIn(home)}:${env.PATH}`;
  return { ...env, ...offline, PATH: path, HOME: home, XDG_CONFIG_HOME: join(home, '.config'), NO_COLOR: '1', ...extra };
}

/** run, with the command's stdout and stderr together as out (what a person at the terminal reads). */
export async function runJoined(command, args, opts) {
  const r = await run(command, args, opts);
  return { ...r, out: r.stdout + r.stderr };
}

/** A home directory for a host's runs, with its environment; remove() deletes it. */
export function hostHome(host, model) {
  const home = mkdtempSync(join(tmpdir(), 'cardwriter-agent-'));
  return { home, env: hostEnv(home, host.env(model)), remove: () => rmSync(home, { recursive: true, force: true }) };
}

/**
 * Runs a host command in home (its own process group, killed whole after RUN_MS); resolves with
 * its exit code, stdout and stderr. answers maps a question the command prints (a RegExp) to the
 * line typed in answer, once each, as the person at the terminal does.
 */
export function run(command, args, { env, cwd, answers = [], ms = RUN_MS }) {
  return new Promise((resolve) => {
    const p = spawn(command, args, { env, cwd, stdio: [answers.length ? 'pipe' : 'ignore', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    const pending = [...answers];
    const answer = () => {
      for (const [i, [question, line]] of pending.entries()) {
        if (question.test(stdout + stderr)) {
          pending.splice(i, 1);
          p.stdin.write(`${line}\n`);
          return;
        }
      }
    };
    p.stdout.on('data', (d) => {
      stdout += d;
      answer();
    });
    p.stderr.on('data', (d) => {
      stderr += d;
      answer();
    });
    p.stdin?.on('error', () => {});
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      process.kill(-p.pid, 'SIGKILL');
    }, ms);
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
export function tail(s, n = 3000) {
  return s.length > n ? `...${s.slice(-n)}` : s;
}

/** What a host run printed, for a failure message. */
export function printed(r) {
  return `${r.timedOut ? `killed after ${RUN_MS} ms\n` : ''}exit ${r.code}\n--- stdout (tail) ---\n${tail(r.stdout)}\n--- stderr (tail) ---\n${tail(r.stderr)}`;
}

/**
 * `cardwriter-mcp login --api-host apiHost` in the host's home, the browser stand-in signing in:
 * the saved sign-in a stdio server started by the host then uses, as the README's lines for the
 * real service expect.
 */
export async function login(h, apiHost) {
  const r = await run(BIN, ['login', '--api-host', apiHost], { env: h.env, cwd: h.home });
  assert.equal(r.code, 0, `cardwriter-mcp login failed:\n${printed(r)}`);
}

/** The README's `claude mcp add` lines, comments dropped. */
function claudeLines() {
  return readmeBlock('claude-code').split('\n').map((l) => l.replace(/#.*/, '').trim()).filter(Boolean);
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
  // Its tools for reading a file the author names: name, and the arguments for a path.
  readFile: { tool: 'Read', args: (path) => ({ file_path: path }) },
  // Over HTTP it signs in only interactively (/mcp): a headless run brings a token.
  signsIn: false,
  env: (model) => ({
    ANTHROPIC_BASE_URL: model.url,
    ANTHROPIC_API_KEY: 'sk-ant-standin',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_AUTOUPDATER: '1',
  }),
  // Its default: the tools listed to the model by name only, loaded with its ToolSearch tool.
  toolSearch: true,
  /**
   * The README's `claude mcp add` line for the transport, run as written: over stdio the
   * sandbox's line, or with apiHost the card service's (its address replaced); over HTTP with a
   * header when token is given (passthrough).
   */
  async configure(h, transport, url, { apiHost, token } = {}) {
    const line = claudeLines().find((l) => (transport === 'http' ? l.includes('--transport http')
      : /\sstdio\b/.test(l) && (apiHost ? l.includes('--env') : !l.includes('--env'))));
    assert.ok(line, `README's Claude Code block has no ${transport} line`);
    let args = line.split(/\s+/).slice(1).map((a) => (a === 'cardwriter-mcp' ? BIN : a === README_URL ? url : a.replace(README_API, apiHost)));
    const name = args[args.indexOf('add') + (transport === 'http' ? 3 : 1)];
    if (token) args = [...args, '--header', `Authorization: Bearer ${token}`];
    const r = await run(this.command, args, { env: h.env, cwd: h.home });
    assert.equal(r.code, 0, `${this.name}: ${line} failed:\n${printed(r)}`);
    return name;
  },
  async connected(h, name) {
    const r = await run(this.command, ['mcp', 'list'], { env: h.env, cwd: h.home });
    const row = r.stdout.split('\n').find((l) => l.startsWith(`${name}:`));
    assert.ok(row && /Connected/.test(row) && !/Failed|Needs/.test(row), `${this.name}: claude mcp list does not show ${name} connected:\n${printed(r)}`);
  },
  prompt(h, name, text = 'Make me a card for Captain Mira Vale.') {
    return run(this.command, ['-p', text, '--allowedTools', `mcp__${name}`, '--output-format', 'json'], { env: h.env, cwd: h.home });
  },
  /** The model's last words in what prompt printed. */
  said(r) {
    try {
      return JSON.parse(r.stdout).result ?? '';
    } catch {
      return r.stdout;
    }
  },
};

const geminiCLI = {
  name: 'Gemini CLI',
  package: '@google/gemini-cli',
  command: process.execPath,
  script: join(modules, '@google', 'gemini-cli', 'bundle', 'gemini.js'),
  prefix: (server) => `mcp_${server}_`,
  // Gemini CLI declares wait_for_previous on every tool and passes it on to the server.
  added: { wait_for_previous: true },
  readFile: { tool: 'read_file', args: (path) => ({ file_path: path }) },
  // read_file cuts every line at 2,000 characters, so a file of one long line (a card's JSON) is
  // read whole through the shell, as a model there does.
  readWhole: { tool: 'run_shell_command', args: (path) => ({ command: `cat ${path}`, description: 'Read the file whole' }) },
  // Over HTTP it signs in by itself (MCP authorization), asking the terminal first.
  signsIn: true,
  env: (model) => ({ GOOGLE_GEMINI_BASE_URL: model.url, GEMINI_API_KEY: 'standin' }),
  /**
   * The README's settings.json entry for the transport, as the user's settings: over stdio with
   * apiHost, the README's entry for the card service (its address replaced).
   */
  async configure(h, transport, url, { apiHost } = {}) {
    const servers = JSON.parse(readmeBlock('gemini-cli')).mcpServers;
    // Over stdio the sandbox's entry, or with apiHost the card service's (its env names it).
    const name = Object.keys(servers).find((n) => (transport === 'http' ? servers[n].url
      : servers[n].command && Boolean(apiHost) === Boolean(servers[n].env?.CARDWRITER_API_HOST)));
    assert.ok(name, `README's Gemini CLI block has no ${transport} server`);
    const entry = { ...servers[name] };
    if (entry.command === 'cardwriter-mcp') entry.command = BIN;
    if (entry.url === README_URL) entry.url = url;
    if (apiHost) entry.env = { ...entry.env, CARDWRITER_API_HOST: apiHost };
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
    const lines = out.split('\n');
    const row = lines.find((l) => l.includes(`${name}:`)) ?? lines.find((l) => l.includes(`${name} `));
    assert.ok(row && /Connected/.test(row) && !/Disconnected/.test(row), `Gemini CLI: gemini mcp list does not show ${name} connected:\n${printed(r)}`);
  },
  prompt(h, name, text = 'Make me a card for Captain Mira Vale.') {
    // The server's tools allowed without a confirmation, which a run without a terminal cannot
    // ask for (a rule of Gemini's policy engine, as --allowedTools for Claude Code).
    const policy = join(h.home, 'cardwriter.toml');
    // And `cat` in the shell (readWhole).
    writeFileSync(policy, `[[rule]]\nmcpName = ${JSON.stringify(name)}\ntoolName = "*"\ndecision = "allow"\npriority = 100\n\n`
      + '[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "cat"\ndecision = "allow"\npriority = 100\n');
    // A model named on the command line: Gemini CLI then asks no classifier which model to use.
    // Its sign-in question ("Do you want to continue? [Y/n]") is answered yes at the terminal.
    return run(this.command, [this.script, '-p', text, '-m', 'gemini-2.5-flash', '--policy', policy, '--output-format', 'text'],
      { env: h.env, cwd: h.home, answers: [[/Do you want to continue\? \[Y\/n\]/, 'y']] });
  },
  said(r) {
    return r.stdout;
  },
};

/** The hosts, Claude Code twice: with its tool search (its default) and without. */
export const HOSTS = [
  claudeCode,
  // Every tool's schema in the model's first request (tool search off, as with a model or a
  // gateway without it).
  { ...claudeCode, name: 'Claude Code without tool search', toolSearch: false, env: (model) => ({ ...claudeCode.env(model), ENABLE_TOOL_SEARCH: 'false' }) },
  geminiCLI,
];

/** Whether a host is installed and runs here: '' when it does, else why not. */
export function missing(host) {
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
