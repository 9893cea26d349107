// The harness of the hosts suite: the built binary started as a host starts it (stdio) or as a
// remote MCP server (streamable HTTP), and clients of both lines of the official MCP TypeScript
// SDK connected to it. Nothing here imitates the SDK: the suite uses it as hosts do.
import { spawn } from 'node:child_process';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport as StdioV1 } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport as HttpV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { AjvJsonSchemaValidator as AjvV1 } from '@modelcontextprotocol/sdk/validation/ajv';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as ClientV2, StreamableHTTPClientTransport as HttpV2 } from '@modelcontextprotocol/client';
import { StdioClientTransport as StdioV2 } from '@modelcontextprotocol/client/stdio';
import { AjvJsonSchemaValidator as AjvV2 } from '@modelcontextprotocol/client/validators/ajv';

/** The binary under test, built by e2e/run (CARDWRITER_BIN). */
export const BIN = process.env.CARDWRITER_BIN;
if (!BIN) {
  throw new Error('CARDWRITER_BIN is not set: run the suite with `bash e2e/run`, which builds the binary');
}

/** The two lines of the official TypeScript SDK that hosts are built on. */
export const LINES = {
  v1: {
    name: '@modelcontextprotocol/sdk 1.32.2',
    Client: ClientV1,
    Stdio: StdioV1,
    Http: HttpV1,
    validator: new AjvV1(),
    // v1: callTool(params, resultSchema, options)
    callTool: (c, params, options) => c.callTool(params, undefined, options),
  },
  v2: {
    name: '@modelcontextprotocol/client 2.4.0',
    Client: ClientV2,
    Stdio: StdioV2,
    Http: HttpV2,
    validator: new AjvV2(),
    // v2: callTool(params, options)
    callTool: (c, params, options) => c.callTool(params, options),
    protocol: '2025-11-25', // v2's default negotiation ('legacy')
  },
  // v2 as hosts that opt in to the newest revision run it: server/discover, no handshake, no
  // session, elicitation as multi round-trip input requests.
  v2m: {
    name: '@modelcontextprotocol/client 2.4.0 (2026-07-28)',
    Client: ClientV2,
    Stdio: StdioV2,
    Http: HttpV2,
    validator: new AjvV2(),
    // 2026-07-28 has no logging/setLevel: each request asks for its log level in _meta.
    callTool: (c, params, options) => c.callTool(c.logLevel ? { ...params, _meta: { ...params._meta, 'io.modelcontextprotocol/logLevel': c.logLevel } } : params, options),
    options: { versionNegotiation: { mode: 'auto' } },
    protocol: '2026-07-28',
  },
};
LINES.v1.protocol = '2025-11-25';

/** The ways a host reaches the server: each SDK line (v2 on both revisions) over each transport. */
export const COMBINATIONS = [
  { line: 'v1', transport: 'stdio' },
  { line: 'v1', transport: 'http' },
  { line: 'v2', transport: 'stdio' },
  { line: 'v2', transport: 'http' },
  { line: 'v2m', transport: 'stdio' },
  { line: 'v2m', transport: 'http' },
];

/** Environment for the binary: no inherited CARDWRITER_ settings. */
export function cleanEnv(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('CARDWRITER_')) env[k] = v;
  }
  return { ...env, ...extra };
}

const children = new Set();
process.on('exit', () => {
  for (const p of children) p.kill('SIGKILL');
});

/**
 * Starts the binary with args and waits until a line of its stderr matches pattern.
 * Returns the process, the match and the stderr seen so far (a getter).
 */
export function startProcess(args, pattern, { env = {}, timeoutMs = 30000 } = {}) {
  const proc = spawn(BIN, args, { env: cleanEnv(env), stdio: ['ignore', 'ignore', 'pipe'] });
  children.add(proc);
  proc.on('exit', () => children.delete(proc));
  let stderr = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${args.join(' ')} did not start in ${timeoutMs} ms:\n${stderr}`)), timeoutMs);
    proc.stderr.on('data', (d) => {
      stderr += d.toString();
      const m = stderr.match(pattern);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, match: m, stderr: () => stderr, stop: () => stopProcess(proc) });
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${args.join(' ')} exited with ${code}:\n${stderr}`));
    });
  });
}

/** Stops a child with SIGTERM (SIGKILL after 5 s) and waits for it. */
export function stopProcess(proc) {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => proc.kill('SIGKILL'), 5000);
    proc.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    proc.kill('SIGTERM');
  });
}

/** Starts `cardwriter-mcp http` (by default with the in-process sandbox); returns its /mcp URL. */
export async function startHTTP(args = ['--sandbox'], env = {}) {
  // A state directory of its own unless args name one: one server per state directory, and the
  // test files run two at a time.
  const state = args.includes('--state-dir') ? [] : ['--state-dir', mkdtempSync(join(tmpdir(), 'cw-http-state-'))];
  const p = await startProcess(['http', '--addr', '127.0.0.1:0', '--log-level', 'warn', ...state, ...args], /MCP endpoint: (http:\/\/\S+\/mcp)/, { env });
  return { ...p, url: p.match[1] };
}

/** Starts `cardwriter-mcp sandbox` on a free port; returns its API host and demo token. */
export async function startSandbox(token = 'e2e-demo-token', extra = []) {
  const p = await startProcess(['sandbox', '--addr', '127.0.0.1:0', '--demo-token', token, '--log-level', 'warn', ...extra],
    /API at (http:\/\/\S+)\/open\/v1/);
  return { ...p, apiHost: p.match[1], token };
}

/**
 * A server to connect to, for one transport: stdio servers are started per client (as hosts do);
 * an HTTP server is started once and shared by the clients of a test file.
 */
export async function serverFor(transport, { args = ['--sandbox'], env = {} } = {}) {
  if (transport === 'stdio') {
    return { transport, args: ['stdio', ...args], env, stop: async () => {} };
  }
  const s = await startHTTP(args, env);
  return { transport, url: s.url, stop: s.stop, stderr: s.stderr };
}

/**
 * Connects a client of the given SDK line to server, as a host would.
 */
export async function connect(lineName, server, { capabilities = {} } = {}) {
  const line = LINES[lineName];
  const client = new line.Client({ name: `e2e-${lineName}`, version: '1.0.0' }, { capabilities, ...(line.options ?? {}) });
  let transport;
  if (server.transport === 'stdio') {
    transport = new line.Stdio({ command: BIN, args: server.args, env: cleanEnv(server.env), stderr: 'ignore' });
  } else {
    transport = new line.Http(new URL(server.url));
  }
  await client.connect(transport);
  return client;
}

/** Sets the level of the log notifications the client gets: logging/setLevel, or from
 * 2026-07-28 on, the level each request declares in its _meta. */
export async function setLogLevel(lineName, client, level) {
  if (LINES[lineName].protocol >= '2026-07-28') {
    client.logLevel = level;
    return;
  }
  await client.setLoggingLevel(level);
}

/** Records the params of every log notification (notifications/message) the client gets. */
export function watchLogs(lineName, client) {
  const list = [];
  if (lineName === 'v1') {
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => list.push(n.params));
  } else {
    client.setNotificationHandler('notifications/message', (n) => list.push(n.params));
  }
  return list;
}

/** Calls a tool with the line's own callTool (which validates structuredContent itself). */
export function callTool(lineName, client, name, args, options) {
  return LINES[lineName].callTool(client, { name, arguments: args }, options);
}

/**
 * Asserts a success result: not isError, structuredContent present and valid against the tool's
 * outputSchema with the SDK's own validator, and a text for text-only clients.
 */
export function assertSuccess(lineName, tool, res) {
  assert.notEqual(res.isError, true, `${tool.name}: isError: ${JSON.stringify(res.content)}`);
  assert.ok(res.structuredContent && typeof res.structuredContent === 'object', `${tool.name}: no structuredContent`);
  const validate = LINES[lineName].validator.getValidator(tool.outputSchema);
  const v = validate(res.structuredContent);
  assert.ok(v.valid, `${tool.name}: structuredContent fails its outputSchema (${LINES[lineName].name} validator): ${v.errorMessage}`);
  assert.ok(res.content.length >= 1 && res.content[0].type === 'text' && res.content[0].text.length > 0, `${tool.name}: no summary text`);
  return res.structuredContent;
}

/**
 * Asserts an error result as hosts need it: isError, no structuredContent, the message first,
 * the rest of the envelope as JSON second (not the message again, retryable a boolean). Returns the
 * envelope, with the message.
 */
export function assertToolError(tool, res, code) {
  assert.equal(res.isError, true, `${tool}: want isError, got ${JSON.stringify(res).slice(0, 300)}`);
  assert.equal(res.structuredContent, undefined, `${tool}: an error result carries structuredContent`);
  assert.equal(res.content.length, 2, `${tool}: want the message and the envelope, got ${JSON.stringify(res.content)}`);
  assert.equal(res.content[0].type, 'text');
  assert.equal(res.content[1].type, 'text');
  const env = JSON.parse(res.content[1].text);
  assert.equal(env.message, undefined, `${tool}: the envelope repeats the message`);
  env.message = res.content[0].text;
  assert.ok(env.message.length > 0, `${tool}: empty message`);
  assert.equal(typeof env.retryable, 'boolean', `${tool}: retryable is not a boolean`);
  if (code) assert.equal(env.error, code, `${tool}: error ${env.error} (${env.message}), want ${code}`);
  return env;
}

/**
 * A reverse proxy in front of an API host that holds each request matching slow for delayMs
 * before passing it on (or until the client goes away): an upstream slow enough to cancel.
 */
export function delayProxy(target, slow, delayMs) {
  const upstream = new URL(target);
  const seen = { slowStarted: 0, slowAborted: 0 };
  const server = http.createServer((req, res) => {
    const forward = () => {
      const out = http.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (r) => {
        res.writeHead(r.statusCode, r.headers);
        r.pipe(res);
      });
      out.on('error', () => res.destroy());
      req.pipe(out);
    };
    if (!slow(req)) return forward();
    seen.slowStarted++;
    const timer = setTimeout(forward, delayMs);
    res.on('close', () => {
      if (!res.writableFinished) {
        seen.slowAborted++;
        clearTimeout(timer);
      }
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      resolve({ url: `http://127.0.0.1:${server.address().port}`, seen, close: () => new Promise((r) => server.close(r)) });
    });
  });
}

/** A 1x1 PNG, base64. */
export const PNG_1x1 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';
