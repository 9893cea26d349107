// The MCP Bundle (packaging/mcpb/manifest.json): validated and packed with npm
// @anthropic-ai/mcpb, unpacked, and started the way Claude Desktop starts it (the manifest's
// command, args and env with ${__dirname} and ${user_config.*} filled in), then used through the
// official TypeScript SDK against a sandbox.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { BIN, cleanEnv, startSandbox } from './lib/harness.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const MCPB = join(here, 'node_modules', '@anthropic-ai', 'mcpb', 'dist', 'cli', 'cli.js');

function mcpb(...args) {
  return new Promise((resolve) => {
    execFile(process.execPath, [MCPB, ...args], { timeout: 120000 }, (err, stdout, stderr) => resolve({ code: err ? err.code ?? 1 : 0, out: stdout + stderr }));
  });
}

it('packs, validates and starts the MCP Bundle as a host does', async () => {
  const work = mkdtempSync(join(tmpdir(), 'mcpb-'));
  const src = join(work, 'bundle');
  mkdirSync(join(src, 'server'), { recursive: true });
  cpSync(join(here, '..', 'packaging', 'mcpb', 'manifest.json'), join(src, 'manifest.json'));
  cpSync(BIN, join(src, 'server', 'cardwriter-mcp'));

  let r = await mcpb('validate', join(src, 'manifest.json'));
  assert.equal(r.code, 0, r.out);
  const file = join(work, 'cardwriter-mcp.mcpb');
  r = await mcpb('pack', src, file);
  assert.equal(r.code, 0, r.out);
  const out = join(work, 'unpacked');
  r = await mcpb('unpack', file, out);
  assert.equal(r.code, 0, r.out);

  const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
  const sandbox = await startSandbox('bundle-token');
  try {
    const fill = (s) => s.replaceAll('${__dirname}', out)
      .replaceAll('${user_config.api_host}', sandbox.apiHost)
      .replaceAll('${user_config.access_token}', sandbox.token);
    const cfg = manifest.server.mcp_config;
    const env = Object.fromEntries(Object.entries(cfg.env).map(([k, v]) => [k, fill(v)]));
    const transport = new StdioClientTransport({ command: fill(cfg.command), args: cfg.args.map(fill), env: cleanEnv(env), stderr: 'ignore' });
    const client = new Client({ name: 'bundle-host', version: '1' });
    await client.connect(transport);
    try {
      const res = await client.callTool({ name: 'whoami', arguments: {} });
      assert.notEqual(res.isError, true, JSON.stringify(res.content));
      assert.equal(res.structuredContent.userId, 'u_demo');
    } finally {
      await client.close();
    }
  } finally {
    await sandbox.stop();
  }
});
