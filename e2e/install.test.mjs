// A new user's first steps, as the README writes them, in a home directory of the test's own:
// install from a clone (`go install`, the lines between the README's install-clone markers) and
// from a release archive (.ci/release for this platform, then the install-archive lines), each
// leaving `cardwriter-mcp` on PATH where the README says, with the version and commit stamped in;
// then Claude Code's `claude mcp add -s user` lines and Gemini CLI's settings and folder-trust line,
// run with `cardwriter-mcp` found on PATH: `claude mcp list` (from another folder: user scope) and
// `gemini mcp list` show every sandbox server connected, and Gemini's "Disabled" before the folder
// is trusted. Go builds use the machine's Go caches and no network (GOPROXY=off); the hosts reach
// nothing beyond loopback. Skipped without git or a host, failing under CI=true.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { runJoined } from './lib/hosts.mjs';
import { cleanEnv, serverFor } from './lib/harness.mjs';
import { readmeBlock } from './lib/readme.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const ROOT = join(here, '..');
const modules = join(here, 'node_modules');
const README_URL = 'http://127.0.0.1:8080/mcp';
const RUN_MS = 240000;
/** runJoined with RUN_MS: builds and installs take longer than a host's turn. */
const runLong = (command, args, opts) => runJoined(command, args, { ...opts, ms: RUN_MS });
const CI = process.env.CI === 'true';


/** Runs the lines of a README block, as the user pastes them, in one bash -e, then more. */
function shell(lines, more, opts) {
  return runLong('bash', ['-e', '-c', `${lines}\n${more}`], opts);
}

/** A Go setting of this machine (the caches the builds share). */
function goEnv(name) {
  return spawnSync('go', ['env', name], { encoding: 'utf8' }).stdout.trim();
}

/** Why this test cannot run here ('' when it can). */
function missing() {
  for (const [cmd, args] of [['git', ['--version']], ['go', ['version']]]) {
    if (spawnSync(cmd, args).status !== 0) return `${cmd} is not installed`;
  }
  if (!existsSync(join(modules, '@anthropic-ai', 'claude-code', 'package.json'))) return '@anthropic-ai/claude-code is not installed in e2e/node_modules';
  if (!existsSync(join(modules, '@google', 'gemini-cli', 'package.json'))) return '@google/gemini-cli is not installed in e2e/node_modules';
  return '';
}

const why = missing();

describe('the README, followed by a new user', { skip: !CI && why ? why : false }, () => {
  assert.equal(why, '', `under CI=true: ${why}`);
  let home;
  let clone;
  let env;
  let server;
  const gobin = () => join(home, 'go', 'bin');

  before(async () => {
    home = mkdtempSync(join(tmpdir(), 'cardwriter-install-'));
    clone = join(home, 'cardwriter-mcp');
    const r = spawnSync('git', ['clone', '-q', ROOT, clone], { encoding: 'utf8' });
    assert.equal(r.status, 0, `git clone: ${r.stderr}`);
    const base = {};
    for (const [k, v] of Object.entries(cleanEnv())) {
      if (!/^(GO[A-Z]*|HOME|XDG_.*|ANTHROPIC_.*|CLAUDE_.*|GEMINI_.*|GOOGLE_.*)$|_PROXY$/i.test(k)) base[k] = v;
    }
    // The machine's node (the hosts need 22), claude, go and the system's tools; nothing of ours.
    const path = [dirname(process.execPath), join(modules, '.bin'), join(goEnv('GOROOT'), 'bin'), '/usr/local/bin', '/usr/bin', '/bin'];
    env = {
      ...base,
      HOME: home,
      PATH: path.join(delimiter),
      // Go's caches as they are on this machine, and no network: nothing is downloaded.
      GOMODCACHE: goEnv('GOMODCACHE'),
      GOCACHE: goEnv('GOCACHE'),
      GOPROXY: 'off',
      GOTOOLCHAIN: 'local',
      GOFLAGS: '',
      // Anything a host sends beyond loopback goes to a proxy that is not there.
      HTTP_PROXY: 'http://127.0.0.1:9',
      HTTPS_PROXY: 'http://127.0.0.1:9',
      NO_PROXY: '127.0.0.1,localhost',
      NO_COLOR: '1',
      DISABLE_AUTOUPDATER: '1',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    };
    server = await serverFor('http');
  });
  after(async () => {
    await server?.stop();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  it('asks for a Node every dependency runs on', () => {
    const min = (range) => (range.match(/>=\s*(\d+)(?:\.(\d+))?/) ?? []).slice(1).map((x) => Number(x ?? 0));
    const pkg = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'));
    const ours = min(pkg.engines.node);
    for (const dep of Object.keys(pkg.dependencies)) {
      const p = join(modules, ...dep.split('/'), 'package.json');
      if (!existsSync(p)) continue;
      const want = JSON.parse(readFileSync(p, 'utf8')).engines?.node;
      if (!want || !/^>=/.test(want.trim())) continue;
      const [maj, minor] = min(want);
      assert.ok(ours[0] > maj || (ours[0] === maj && ours[1] >= minor), `e2e/package.json engines.node ${pkg.engines.node}, but ${dep} needs ${want}`);
    }
  });

  it('installs from a clone with go install: on PATH, with the commit stamped in', async () => {
    const r = await shell(readmeBlock('install-clone'), 'command -v cardwriter-mcp\ncardwriter-mcp version', { env, cwd: clone });
    assert.equal(r.code, 0, r.out);
    assert.ok(r.out.includes(`${gobin()}/cardwriter-mcp\n`), `not in ${gobin()} on PATH, as the README says:\n${r.out}`);
    const head = spawnSync('git', ['-C', clone, 'rev-parse', '--short=12', 'HEAD'], { encoding: 'utf8' }).stdout.trim();
    assert.match(r.out, new RegExp(`cardwriter-mcp \\S+ \\(commit ${head}, go`), `version does not name the commit ${head}:\n${r.out}`);
  });

  it('installs from a release archive', async () => {
    const dl = join(home, 'Downloads');
    const goos = goEnv('GOOS');
    const goarch = goEnv('GOARCH');
    const rel = await runLong('bash', ['.ci/release', 'v0.0.0-readme'], { env: { ...env, RELEASE_TARGETS: `${goos}/${goarch}`, RELEASE_OUT: dl }, cwd: clone });
    assert.equal(rel.code, 0, rel.out);
    const lines = readmeBlock('install-archive').replaceAll('linux_amd64', `${goos}_${goarch}`);
    // ~/.local/bin is on PATH in most Linux shells (their profile adds it once it exists).
    const r = await shell(lines, 'command -v cardwriter-mcp\ncardwriter-mcp version', { env: { ...env, PATH: `${join(home, '.local', 'bin')}${delimiter}${env.PATH}` }, cwd: dl });
    assert.equal(r.code, 0, r.out);
    assert.ok(r.out.includes(`${join(home, '.local', 'bin')}/cardwriter-mcp\n`), r.out);
    assert.match(r.out, /cardwriter-mcp v0\.0\.0-readme \(commit /, r.out);
  });

  it('connects Claude Code with the README\'s lines, in every folder (user scope)', async () => {
    const hostEnv = { ...env, PATH: `${gobin()}${delimiter}${env.PATH}` };
    const lines = readmeBlock('claude-code').replaceAll(README_URL, server.url);
    const r = await shell(lines, '', { env: hostEnv, cwd: home });
    assert.equal(r.code, 0, r.out);
    const elsewhere = join(home, 'some', 'other', 'folder');
    mkdirSync(elsewhere, { recursive: true });
    const list = await runLong('claude', ['mcp', 'list'], { env: hostEnv, cwd: elsewhere });
    for (const name of ['cardwriter-sandbox', 'cardwriter-http', 'cardwriter']) {
      const row = list.out.split('\n').find((l) => l.startsWith(`${name}:`));
      assert.ok(row && /Connected/.test(row) && !/Failed|Needs/.test(row), `claude mcp list from another folder does not show ${name} connected:\n${list.out}`);
    }
  });

  it('connects Gemini CLI with the README\'s settings once the folder is trusted', async () => {
    const hostEnv = { ...env, PATH: `${gobin()}${delimiter}${env.PATH}` };
    const gemini = [join(modules, '@google', 'gemini-cli', 'bundle', 'gemini.js'), 'mcp', 'list'];
    mkdirSync(join(home, '.gemini'), { recursive: true });
    writeFileSync(join(home, '.gemini', 'settings.json'), readmeBlock('gemini-cli').replaceAll(README_URL, server.url));
    const work = join(home, 'cards');
    mkdirSync(work, { recursive: true });
    const rowOf = (out, name) => out.split('\n').find((l) => l.includes(` ${name}:`));
    const names = Object.keys(JSON.parse(readmeBlock('gemini-cli')).mcpServers);
    const untrusted = await runLong(process.execPath, gemini, { env: hostEnv, cwd: work });
    for (const name of names) {
      assert.match(rowOf(untrusted.out, name) ?? '', /Disabled/, `before the folder is trusted, gemini mcp list shows ${name} otherwise:\n${untrusted.out}`);
    }
    const trust = await shell(readmeBlock('gemini-trust'), '', { env: hostEnv, cwd: work });
    assert.equal(trust.code, 0, trust.out);
    const list = await runLong(process.execPath, gemini, { env: hostEnv, cwd: work });
    for (const name of names) {
      const row = rowOf(list.out, name);
      assert.ok(row && /Connected/.test(row) && !/Disconnected|Disabled/.test(row), `gemini mcp list does not show ${name} connected:\n${list.out}`);
    }
  });
});
