// Several `cardwriter-mcp http` replicas behind a real reverse proxy (nginx, round robin, nothing
// sticky) on one real Redis, in front of one sandbox: the setup of "Running several replicas" in
// the README, started by the tests themselves on free loopback ports in temporary directories.
import { spawn, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, writeFileSync, readFileSync, readdirSync, existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { startProcess, startSandbox } from './harness.mjs';

/**
 * The path of program, or null when it is not installed. Under CI=true a missing program is an
 * error (.ci/run installs it); elsewhere the caller skips with the message.
 */
export function need(program, debianPackage) {
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/sbin', '/usr/bin'])) {
    const p = path.join(dir, program);
    if (existsSync(p)) return { path: p };
  }
  const message = `${program} is not installed (Debian package ${debianPackage}; .ci/run installs it)`;
  if (process.env.CI === 'true') throw new Error(message);
  return { skip: message };
}

/** A loopback TCP port free at the time of the call. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function waitPort(port, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const c = net.connect(port, '127.0.0.1');
      c.once('connect', () => { c.destroy(); resolve(); });
      c.once('error', () => {
        c.destroy();
        if (Date.now() > deadline) reject(new Error(`nothing answers on port ${port}`));
        else setTimeout(attempt, 25);
      });
    };
    attempt();
  });
}

const children = new Set();
process.on('exit', () => {
  for (const p of children) p.kill('SIGKILL');
});

function run(bin, args) {
  const proc = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  children.add(proc);
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  proc.on('exit', () => children.delete(proc));
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  return { proc, stderr: () => stderr, exited };
}

/** A redis-server of its own, its append-only file synced at every write (a restart keeps all). */
export async function startRedis(bin) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cw-redis-'));
  const port = await freePort();
  const start = async () => {
    const r = run(bin, ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'yes', '--appendfsync', 'always']);
    await waitPort(port);
    return r;
  };
  let r = await start();
  return {
    url: `redis://127.0.0.1:${port}/0`,
    /** Everything written to Redis so far, as its append-only files hold it (plain RESP). */
    written() {
      const aof = path.join(dir, 'appendonlydir');
      if (!existsSync(aof)) return '';
      return readdirSync(aof).map((f) => readFileSync(path.join(aof, f), 'latin1')).join('\n');
    },
    async stop() { r.proc.kill('SIGKILL'); await r.exited; },
    async restart() {
      if (r.proc.exitCode === null && r.proc.signalCode === null) return; // running
      r = await start();
    },
    /** Freezes the server (SIGSTOP): connections are accepted, nothing is answered. */
    pause() { r.proc.kill('SIGSTOP'); },
    resume() { r.proc.kill('SIGCONT'); },
  };
}

const execFileP = promisify(execFile);

/** Runs redis-cli against the server on port and returns its answer as text. */
async function cli(bin, port, ...args) {
  const { stdout } = await execFileP(bin, ['-h', '127.0.0.1', '-p', String(port), ...args], { timeout: 5000 });
  return stdout;
}

/** Polls cond (every 50 ms) until it holds; throws after timeoutMs, naming what it waited for. */
export async function waitUntil(what, cond, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await cond().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`waited ${timeoutMs / 1000} s for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A redis-server of a replicated deployment (no persistence: a replica holds the data); start() again after kill(). */
async function redisNode(bin, args) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cw-redis-'));
  const port = await freePort();
  const node = {
    port,
    addr: `127.0.0.1:${port}`,
    r: null,
    async start() {
      node.r = run(bin, ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', ...args]);
      await waitPort(port);
    },
    running() { return node.r && node.r.proc.exitCode === null && node.r.proc.signalCode === null; },
    async kill() { if (node.running()) { node.r.proc.kill('SIGKILL'); await node.r.exited; } },
  };
  await node.start();
  return node;
}

/** Whether the server on port is a replica in sync with its primary. */
async function inSync(cliBin, port) {
  const info = await cli(cliBin, port, 'INFO', 'replication');
  return info.includes('role:slave') && info.includes('master_link_status:up');
}

/**
 * A Sentinel-managed Redis: a primary, its replica, three sentinels (quorum 2, a primary down
 * after a second without an answer). killPrimary() kills the primary the sentinels name with
 * SIGKILL; after failedOver(), restartKilled() brings it back, and the sentinels make it a replica.
 */
export async function startSentinelRedis(redisBin, sentinelBin, cliBin) {
  const master = 'cardwriter';
  const nodes = [await redisNode(redisBin, [])];
  nodes.push(await redisNode(redisBin, ['--replicaof', '127.0.0.1', String(nodes[0].port)]));
  const sentinels = [];
  for (let i = 0; i < 3; i++) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'cw-sentinel-'));
    const port = await freePort();
    writeFileSync(path.join(dir, 'sentinel.conf'), [`port ${port}`, 'bind 127.0.0.1', `dir ${dir}`,
      `sentinel monitor ${master} 127.0.0.1 ${nodes[0].port} 2`, `sentinel down-after-milliseconds ${master} 1000`,
      `sentinel failover-timeout ${master} 5000`, `sentinel parallel-syncs ${master} 1`, ''].join('\n'));
    sentinels.push({ port, r: run(sentinelBin, [path.join(dir, 'sentinel.conf')]) });
    await waitPort(port);
  }
  await waitUntil('the replica in sync', () => inSync(cliBin, nodes[1].port));
  for (const s of sentinels) {
    await waitUntil(`sentinel ${s.port} to know the replica and the other sentinels`, async () => {
      const reps = await cli(cliBin, s.port, 'SENTINEL', 'REPLICAS', master);
      const others = await cli(cliBin, s.port, 'SENTINEL', 'SENTINELS', master);
      return reps.includes('ip') && (others.match(/^runid$/gm) ?? []).length === 2;
    });
  }
  const primaryPort = async () => {
    for (const s of sentinels) {
      const out = await cli(cliBin, s.port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', master).catch(() => '');
      const port = Number(out.trim().split('\n')[1]);
      if (port) return port;
    }
    return 0;
  };
  let killed = null;
  return {
    form: 'sentinel',
    url: `redis-sentinel://${sentinels.map((s) => `127.0.0.1:${s.port}`).join(',')}/${master}`,
    async killPrimary() {
      const port = await primaryPort();
      killed = nodes.find((n) => n.port === port);
      await killed.kill();
      return killed.addr;
    },
    /** Whether the sentinels name another primary than the one killed. */
    async failedOver() { const p = await primaryPort(); return p !== 0 && p !== killed.port; },
    async restartKilled() { await killed.start(); },
    async stop() {
      for (const s of sentinels) { s.r.proc.kill('SIGKILL'); await s.r.exited; }
      for (const n of nodes) await n.kill();
    },
  };
}

/**
 * A Redis Cluster of three primaries with a replica each (a primary failed over after a second
 * without an answer), made with redis-cli --cluster create. killPrimary() kills one primary
 * with SIGKILL; after failedOver() (its replica serves its slots), restartKilled() brings it
 * back, and it rejoins as a replica.
 */
export async function startClusterRedis(redisBin, cliBin) {
  const nodes = [];
  for (let i = 0; i < 6; i++) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'cw-cluster-'));
    nodes.push(await redisNode(redisBin, ['--cluster-enabled', 'yes', '--cluster-config-file', path.join(dir, 'nodes.conf'), '--cluster-node-timeout', '1000']));
  }
  await execFileP(cliBin, ['--cluster', 'create', ...nodes.map((n) => n.addr), '--cluster-replicas', '1', '--cluster-yes'], { timeout: 30000 });
  for (const n of nodes) {
    await waitUntil(`${n.addr} to see the cluster ok`, async () => {
      const info = await cli(cliBin, n.port, 'CLUSTER', 'INFO');
      if (!info.includes('cluster_state:ok') || !info.includes('cluster_known_nodes:6')) return false;
      const repl = await cli(cliBin, n.port, 'INFO', 'replication');
      return repl.includes('role:master') || inSync(cliBin, n.port);
    });
  }
  /** The addresses of the primaries that serve slots, as a live node sees them. */
  const primaries = async () => {
    for (const n of nodes.filter((n) => n.running())) {
      const out = await cli(cliBin, n.port, 'CLUSTER', 'NODES').catch(() => '');
      if (!out) continue;
      return out.trim().split('\n').map((l) => l.split(' ')).filter((f) => f[2].includes('master') && !f[2].includes('fail') && f.length > 8)
        .map((f) => f[1].split('@')[0]);
    }
    return [];
  };
  let killed = null;
  return {
    form: 'cluster',
    url: `redis-cluster://${nodes.map((n) => n.addr).join(',')}`,
    async killPrimary() {
      const [addr] = await primaries();
      killed = nodes.find((n) => n.addr === addr);
      await killed.kill();
      return killed.addr;
    },
    /** Whether three primaries serve the slots again, the one killed not among them, and the cluster is ok. */
    async failedOver() {
      const p = await primaries();
      if (p.length !== 3 || p.includes(killed.addr)) return false;
      const live = nodes.find((n) => n.running());
      return (await cli(cliBin, live.port, 'CLUSTER', 'INFO')).includes('cluster_state:ok');
    },
    async restartKilled() { await killed.start(); },
    async stop() { for (const n of nodes) await n.kill(); },
  };
}

/**
 * nginx in front of backends (host:port), round robin, no affinity, streaming (no buffering);
 * its access log names the replica that served each request and the request's MCP session.
 */
export async function startNginx(bin, backends) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cw-nginx-'));
  const port = await freePort();
  const conf = `
${process.getuid?.() === 0 ? 'user root;' : ''}
worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 512; }
http {
  log_format replicas '$request_method $uri $status $upstream_addr $http_mcp_session_id';
  access_log ${dir}/access.log replicas;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  client_max_body_size 64m;
  client_body_buffer_size 64m;
  # max_fails=0: a replica that refused a connection is tried again at the next request (a refused
  # connection passes the request to the other replica). With max_fails=1, a request made while
  # both replicas were down (a host's GET stream reconnecting) kept both out for fail_timeout after
  # they were back, and the next calls got 502.
  upstream mcp {
${backends.map((b) => `    server ${b} max_fails=0;`).join('\n')}
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://mcp;
      proxy_http_version 1.1;
      proxy_set_header Host $http_host;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 300s;
    }
  }
}
`;
  writeFileSync(path.join(dir, 'nginx.conf'), conf);
  const n = run(bin, ['-p', dir, '-c', path.join(dir, 'nginx.conf')]);
  try {
    await waitPort(port);
  } catch (e) {
    throw new Error(`nginx did not start: ${n.stderr()} ${existsSync(path.join(dir, 'error.log')) ? readFileSync(path.join(dir, 'error.log'), 'utf8') : ''}`);
  }
  return {
    url: `http://127.0.0.1:${port}`,
    /** The access log: one {method, uri, status, upstream, session} per request. */
    log() {
      const p = path.join(dir, 'access.log');
      if (!existsSync(p)) return [];
      return readFileSync(p, 'utf8').trim().split('\n').filter(Boolean).map((l) => {
        const [method, uri, status, upstream, session] = l.split(' ');
        return { method, uri, status: Number(status), upstream, session };
      });
    },
    async stop() { n.proc.kill('SIGTERM'); await n.exited; },
  };
}

/**
 * The cluster: a sandbox (the card service, with its OAuth server), Redis (store 'redis': one
 * server; 'sentinel' or 'cluster': a replicated deployment; 'embedded': none), replicas of `cardwriter-mcp http` in proxy mode sharing one state key, and nginx
 * in front. Returns null with skip set when Redis or nginx is missing outside CI.
 */
export async function startCluster({ replicas = 2, store = 'redis', sandboxArgs = [], replicaArgs = [], users = [] } = {}) {
  const redisBin = store === 'embedded' ? { path: null } : need('redis-server', 'redis-server');
  const sentinelBin = store === 'sentinel' ? need('redis-sentinel', 'redis-sentinel') : {};
  const cliBin = store === 'sentinel' || store === 'cluster' ? need('redis-cli', 'redis-tools') : {};
  const nginxBin = need('nginx', 'nginx');
  const skip = redisBin.skip ?? sentinelBin.skip ?? cliBin.skip ?? nginxBin.skip;
  if (skip) return { skip };
  const sandboxData = path.join(mkdtempSync(path.join(os.tmpdir(), 'cw-sandbox-')), 'sandbox.json');
  if (users.length) {
    // Accounts the sandbox's sign-in page offers besides the demo user: { id, nickname }.
    const seeded = Object.fromEntries(users.map((u) => [u.id, { ...u, scopes: ['mcp:card-writer'] }]));
    writeFileSync(sandboxData, JSON.stringify({ version: 1, users: seeded }));
  }
  const sandbox = await startSandbox('e2e-demo-token', ['--data', sandboxData, ...sandboxArgs]);
  let redis = null;
  if (store === 'redis') redis = await startRedis(redisBin.path);
  else if (store === 'sentinel') redis = await startSentinelRedis(redisBin.path, sentinelBin.path, cliBin.path);
  else if (store === 'cluster') redis = await startClusterRedis(redisBin.path, cliBin.path);
  const stateKey = randomBytes(32).toString('base64');
  const addrs = [];
  for (let i = 0; i < replicas; i++) addrs.push(`127.0.0.1:${await freePort()}`);
  const nginx = await startNginx(nginxBin.path, addrs);
  const stateDirs = addrs.map(() => mkdtempSync(path.join(os.tmpdir(), 'cw-state-')));
  const procs = [];
  const startReplica = async (i) => {
    const args = ['http', '--addr', addrs[i], '--public-url', nginx.url, '--api-host', sandbox.apiHost,
      '--auth', 'proxy', '--state-dir', stateDirs[i], '--log-level', 'warn'];
    if (redis) args.push('--store', redis.url);
    args.push(...replicaArgs);
    procs[i] = await startProcess(args, /MCP endpoint: (http:\/\/\S+\/mcp)/, { env: { CARDWRITER_STATE_KEY: stateKey } });
    return procs[i];
  };
  for (let i = 0; i < replicas; i++) await startReplica(i);
  return {
    sandbox, redis, nginx, addrs,
    /** The roleNames of the cards the sandbox holds (from its data file, written at every change). */
    cardNames() {
      const st = JSON.parse(readFileSync(sandboxData, 'utf8'));
      return Object.values(st.cards ?? {}).map((c) => c.roleName);
    },
    /** The MCP endpoint through nginx. */
    mcpUrl: new URL(`${nginx.url}/mcp`),
    /** The MCP endpoint of replica i, bypassing nginx. */
    replicaUrl: (i) => new URL(`http://${addrs[i]}/mcp`),
    /** A fetch that goes through nginx, or straight to replica route.to when it is set. */
    routedFetch(route) {
      return (url, init) => {
        if (route.to === null) return fetch(url, init);
        const u = new URL(url);
        u.host = addrs[route.to];
        return fetch(u, init);
      };
    },
    /** Kills replica i at once (SIGKILL: as a crash). */
    async kill(i) {
      const p = procs[i].proc;
      if (p.exitCode === null && p.signalCode === null) {
        const gone = new Promise((r) => p.once('exit', r));
        p.kill('SIGKILL');
        await gone;
      }
    },
    start: startReplica,
    stderr: (i) => procs[i].stderr(),
    async stop() {
      await Promise.all(procs.map((p) => p.stop()));
      await nginx.stop();
      if (redis) await redis.stop();
      await sandbox.stop();
    },
  };
}
