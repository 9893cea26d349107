// Ready for the real card service: a stand-in service that answers in ways the API document
// allows but the sandbox never does (204 for a "saved" write, {saved: true}, fields we do not
// know, another visibility, other digests, POST where the contract guessed PUT), driven through
// the MCP layer by the official TypeScript SDK clients, which validate every result.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

import { LINES, assertSuccess, assertToolError, callTool, connect, serverFor, startSandbox } from './lib/harness.mjs';

/** The README's example override (the trial upsert as POST), so that the documented file is the tested one. */
function readmeOverride() {
  const readme = readFileSync(join(dirname(fileURLToPath(import.meta.url)), '..', 'docs', 'contract.md'), 'utf8');
  const block = readme.slice(readme.indexOf('<!-- contract-example:begin -->'), readme.indexOf('<!-- contract-example:end -->'));
  return block.slice(block.indexOf('```json\n') + 8, block.lastIndexOf('```'));
}

/**
 * The stand-in: a proxy in front of a sandbox that rewrites some answers. requests records what
 * the service received (method and path).
 */
function standIn(target) {
  const upstream = new URL(target);
  const requests = [];
  const rewrites = [
    // A "saved" write answered 204 with no body.
    { when: (m, p) => m === 'PATCH' && p.endsWith('/welcome'), status: 204, edit: () => '' },
    // A "saved" write answered {"saved": true}.
    { when: (m, p) => m === 'POST' && /\/role\/[^/]+\/document$/.test(p), status: 200, edit: () => '{"saved":true}' },
    // A card with another visibility value and a field more.
    { when: (m, p) => m === 'GET' && p.startsWith('/open/v1/role/detail'), edit: (b) => b.replace('"roleVisibility":"private"', '"roleVisibility":"unlisted","likes":3') },
    // An entry with a field more.
    { when: (m, p) => m === 'GET' && p.startsWith('/open/v1/worldbook/entry/list'), edit: (b) => b.replaceAll('"activationCount":', '"embedding":[0.5],"activationCount":') },
    // Trial digests in another encoding, and a field more.
    { when: (m, p) => p.startsWith('/open/v1/trial-cards/'), edit: (b) => b.replace(/"[0-9a-f]{64}"/g, '"sha256:q83vEjRWeJA="').replace('{', '{"region":"eu",') },
  ];
  const server = http.createServer((req, res) => {
    let path = req.url;
    let method = req.method;
    requests.push(`${method} ${path.split('?')[0]}`);
    // The trial upsert is taken as POST only: the stand-in passes it to the sandbox as PUT.
    if (path.startsWith('/open/v1/trial-cards/') && method === 'PUT') {
      res.writeHead(405, { 'Content-Type': 'application/json' });
      res.end('{"error":"method_not_allowed","message":"Use POST to create or update a trial card."}');
      return;
    }
    if (path.startsWith('/open/v1/trial-cards/') && method === 'POST') method = 'PUT';
    const out = http.request({ host: upstream.hostname, port: upstream.port, method, path, headers: req.headers }, (r) => {
      const chunks = [];
      r.on('data', (c) => chunks.push(c));
      r.on('end', () => {
        let body = Buffer.concat(chunks).toString();
        let status = r.statusCode;
        const rw = status < 300 && rewrites.find((x) => x.when(req.method, path));
        if (rw) {
          body = rw.edit(body);
          status = rw.status ?? status;
        }
        const headers = body ? { 'Content-Type': 'application/json' } : {};
        res.writeHead(status, headers);
        res.end(body);
      });
    });
    out.on('error', () => res.destroy());
    req.pipe(out);
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve({ url: `http://127.0.0.1:${server.address().port}`, requests, close: () => new Promise((r) => server.close(r)) }));
  });
}

for (const line of ['v1', 'v2']) {
  describe(`${LINES[line].name} against a stand-in service`, () => {
    let sandbox;
    let service;
    let contractFile;
    before(async () => {
      sandbox = await startSandbox();
      service = await standIn(sandbox.apiHost);
      contractFile = join(mkdtempSync(join(tmpdir(), 'contract-')), 'trial-post.json');
      writeFileSync(contractFile, readmeOverride());
    });
    after(async () => {
      await service.close();
      await sandbox.stop();
    });

    it('reads every allowed variant, and with the override sends the upsert as POST', async () => {
      const server = await serverFor('stdio', { args: ['--api-host', service.url, '--contract', contractFile], env: { CARDWRITER_TOKEN: sandbox.token } });
      const client = await connect(line, server);
      try {
        const { tools } = await client.listTools();
        const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
        const good = async (name, args) => assertSuccess(line, byName[name], await callTool(line, client, name, args));

        const { roleId } = await good('create_card', { roleName: 'Stand-in' });
        const saved = await good('set_opening_lines', { roleId, roleWelcome: 'Hello.' });
        // The write names the revision it kept (issue 23) beside what the service's 204 left.
        assert.match(saved.revision?.revisionId ?? '', /^rv_/);
        assert.deepEqual({ ...saved, revision: undefined }, { roleId, ok: true, revision: undefined });
        const doc = await good('write_card_document', { roleId, sections: { description: 'A keeper.' } });
        assert.match(doc.revision?.revisionId ?? '', /^rv_/);
        assert.deepEqual({ ...doc, revision: undefined }, { roleId, ok: true, saved: true, revision: undefined });
        const card = await good('get_card', { roleId });
        assert.equal(card.roleVisibility, 'unlisted');
        assert.equal(card.likes, 3);
        assert.equal(card.roleWelcome, 'Hello.', 'the 204 write was applied');

        const { worldbookId } = await good('create_worldbook', { name: 'Shoals' });
        await good('write_worldbook_document', { worldbookId, entries: [{ op: 'create', name: 'Kraken', content: 'It waits.', keywords: ['kraken'] }] });
        const entries = await good('list_worldbook_entries', { worldbookId, detail: 'full' });
        assert.deepEqual(entries.entries[0].embedding, [0.5]);

        const trial = await good('upsert_trial_card', { clientKey: 'standin-1', card: { roleName: 'Trial' } });
        assert.match(trial.sections.roleName, /^sha256:/);
        assert.equal(trial.region, 'eu');
        assert.ok(service.requests.includes('POST /open/v1/trial-cards/standin-1'), service.requests.join('\n'));
        assert.ok(!service.requests.includes('PUT /open/v1/trial-cards/standin-1'));
        await good('get_trial_card', { clientKey: 'standin-1' });
        await good('delete_trial_card', { clientKey: 'standin-1' });
      } finally {
        await client.close();
      }
    });

    it('without the override, the guessed PUT is refused as a result the model reads', async () => {
      const server = await serverFor('stdio', { args: ['--api-host', service.url], env: { CARDWRITER_TOKEN: sandbox.token } });
      const client = await connect(line, server);
      try {
        await client.listTools();
        const res = await callTool(line, client, 'upsert_trial_card', { clientKey: 'standin-2', card: { roleName: 'Trial' } });
        const env = assertToolError('upsert_trial_card', res, 'method_not_allowed');
        assert.match(env.message, /Use POST/);
      } finally {
        await client.close();
      }
    });
  });
}
