// The hosts suite: the built binary driven by the official MCP TypeScript SDK clients that hosts
// are built on (v1 @modelcontextprotocol/sdk and v2 @modelcontextprotocol/client), over stdio and
// streamable HTTP. Every tool on its success path and on an error path, every resource template
// and prompt, logging, progress, cancellation and an HTTP reconnect.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';

import {
  COMBINATIONS, LINES, PNG_1x1, assertSuccess, assertToolError, callTool, connect, delayProxy,
  serverFor, setLogLevel, startSandbox, watchLogs,
} from './lib/harness.mjs';

const V2_CARD = {
  spec: 'chara_card_v2',
  spec_version: '2.0',
  data: {
    name: 'Captain Vey',
    description: 'A smuggler captain with a debt to pay.',
    personality: 'Dry, loyal.',
    scenario: 'The player boards the Kestrel.',
    first_mes: '"You\'re late, pilot."',
    mes_example: '<START>\n{{user}}: Hello?\n{{char}}: Sit.',
    creator_notes: 'Made for the e2e suite.',
    system_prompt: '',
    post_history_instructions: '',
    alternate_greetings: ['"Another stowaway? Fine."'],
    tags: ['sci-fi'],
    creator: 'e2e',
    character_version: '1.0',
    extensions: { e2e: { kept: true } },
    character_book: {
      name: 'Kestrel lore',
      extensions: {},
      entries: [
        { keys: ['Kestrel'], content: 'A battered freighter.', extensions: {}, enabled: true, insertion_order: 0, name: 'The Kestrel', comment: 'The Kestrel' },
      ],
    },
  },
};

const WORLD_INFO = {
  name: 'Shoals',
  entries: { 0: { uid: 0, key: ['kraken'], keysecondary: [], content: 'A kraken haunts the Shoals.', comment: 'Kraken', constant: false, disable: false, order: 100, position: 0 } },
};

for (const { line, transport } of COMBINATIONS) {
  describe(`${LINES[line].name} over ${transport}`, () => {
    let server;
    before(async () => {
      server = await serverFor(transport);
    });
    after(async () => {
      await server.stop();
    });

    it('speaks the newest revision its SDK line does', async () => {
      const client = await connect(line, server);
      try {
        // v1 and v2 by default speak 2025-11-25; v2 opted in speaks 2026-07-28 (no handshake, no
        // session) over stdio and HTTP alike.
        if (line === 'v1' && transport === 'stdio') return; // v1's stdio transport does not keep it
        const got = line === 'v1' ? client.transport?.protocolVersion : client.getNegotiatedProtocolVersion();
        assert.equal(got, LINES[line].protocol);
      } finally {
        await client.close();
      }
    });

    it('calls every tool on its success path and on an error path', async () => {
      const client = await connect(line, server);
      try {
        const { tools } = await client.listTools();
        const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
        const ok = new Set();
        const failed = new Set();
        const good = async (name, args, options) => {
          const res = await callTool(line, client, name, args, options);
          ok.add(name);
          return assertSuccess(line, byName[name], res);
        };
        const bad = async (name, args, code) => {
          const res = await callTool(line, client, name, args);
          failed.add(name);
          return assertToolError(name, res, code);
        };

        // Every tool advertises what hosts show and validate.
        for (const t of tools) {
          assert.ok(t.title || t.annotations?.title, `${t.name}: no title`);
          assert.equal(t.inputSchema.type, 'object', `${t.name}: input schema type`);
          assert.ok(t.outputSchema, `${t.name}: no outputSchema`);
          for (const hint of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint']) {
            assert.equal(typeof t.annotations?.[hint], 'boolean', `${t.name}: ${hint} not set`);
          }
          // The SDK's own validator compiles every output schema.
          LINES[line].validator.getValidator(t.outputSchema);
        }

        const me = await good('whoami', {});
        assert.ok(me.userId);
        await bad('whoami', { bogus: 1 }, 'invalid_arguments');

        const card = await good('create_card', { roleName: 'Captain Mira Vale', language: 'en' });
        const roleId = card.roleId;
        const missing = await bad('create_card', {}, 'invalid_arguments');
        assert.match(missing.message, /roleName/);

        await good('set_opening_lines', { roleId, roleWelcome: '"You\'re late, pilot."', alternates: ['"Sit."'], prologue: ['Sorry, Captain.'] });
        const wrongType = await bad('set_opening_lines', { roleId, roleWelcome: 5 }, 'invalid_arguments');
        assert.match(wrongType.message, /\/roleWelcome/);

        const got = await good('get_card', { roleId });
        assert.equal(got.roleWelcome, '"You\'re late, pilot."');
        const notFound = await bad('get_card', { roleId: 'nope' });
        assert.match(notFound.error, /not_found/);

        const image = await good('upload_image', { purpose: 'avatar', roleId, contentType: 'image/png', dataBase64: PNG_1x1 });
        await bad('upload_image', { purpose: 'avatar', roleId, contentType: 'image/png', dataBase64: 'bm90IGFuIGltYWdl' });

        await good('update_card_profile', { roleId, roleDesc: 'A smuggler captain.', tags: ['sci-fi'], avatarImageId: image.imageId });
        await bad('update_card_profile', { roleId: 'nope', roleDesc: 'x' });

        await good('write_card_document', { roleId, sections: { description: 'Mira Vale captains the Kestrel.', personality: 'Dry.' } });
        await bad('write_card_document', { roleId, sections: { nonsense: 'x' } }, 'invalid_arguments');

        await good('set_card_visibility', { roleId, visibility: 'private' });
        await bad('set_card_visibility', { roleId, visibility: 'public' }, 'invalid_arguments');

        const assets = await good('list_card_assets', { roleId });
        assert.ok(assets.images.some((i) => i.imageId === image.imageId));
        await bad('list_card_assets', { roleId: 'nope' });

        const report = await good('validate_card', { roleId });
        assert.equal(report.ready, true, JSON.stringify(report));
        await bad('validate_card', { roleId: 'nope' });

        const review = await good('review_card', { roleId });
        assert.equal(review.encoding, 'cl100k_base');
        assert.ok(review.tokens.total > 0);
        await bad('review_card', { roleId: 'nope' });

        const wb = await good('create_worldbook', { name: 'Shoals', description: 'Sea lore.' });
        const worldbookId = wb.worldbookId;
        await bad('create_worldbook', { description: 'no name' }, 'invalid_arguments');

        const written = await good('write_worldbook_document', {
          worldbookId,
          entries: [{ op: 'create', name: 'Kraken', content: 'A kraken haunts the Shoals.', keywords: ['kraken'] }],
          binding: { roleId },
        });
        assert.equal(written.createdEntryIds.length, 1);
        await bad('write_worldbook_document', { worldbookId, entries: [{ op: 'update', entryId: 'no-such-entry', content: 'x' }] });

        await good('get_worldbook', { worldbookId });
        await bad('get_worldbook', { worldbookId: 'nope' });

        const entries = await good('list_worldbook_entries', { worldbookId });
        assert.equal(entries.entries.length, 1);
        await bad('list_worldbook_entries', { worldbookId: 'nope' });

        await good('list_worldbooks', {});
        await bad('list_worldbooks', { bogus: true }, 'invalid_arguments');

        const bound = await good('list_card_worldbooks', { roleId });
        assert.ok(bound.list.some((w) => w.worldbookId === worldbookId));
        await bad('list_card_worldbooks', { roleId: 'nope' });

        const fired = await good('test_worldbook_triggers', { worldbookId, text: 'The kraken rises.' });
        assert.equal(fired.fired.length, 1);
        await bad('test_worldbook_triggers', { text: 'neither worldbookId nor entries' });

        const xray = await good('preview_prompt', { roleId, chat: [{ text: 'The kraken rises.', user: true }] });
        assert.ok(xray.blocks.some((b) => b.entries?.length), JSON.stringify(xray.blocks));
        await bad('preview_prompt', { chat: [] });

        const trial = await good('upsert_trial_card', { clientKey: 'e2e-trial', card: { roleName: 'Trial Mira', sections: { description: 'A try.' } } });
        assert.equal(trial.created, true);
        await bad('upsert_trial_card', { clientKey: 'not a key', card: { roleName: 'x' } }, 'invalid_arguments');

        await good('get_trial_card', { clientKey: 'e2e-trial' });
        await bad('get_trial_card', { clientKey: 'no-such-trial' }, 'trial_not_found');

        const trials = await good('list_trial_cards', {});
        assert.ok(trials.slots.max >= 1);
        await bad('list_trial_cards', { bogus: 1 }, 'invalid_arguments');

        await good('delete_trial_card', { clientKey: 'e2e-trial' });
        await bad('delete_trial_card', { clientKey: 'e2e-trial' }, 'trial_not_found');

        const imported = await good('import_tavern_card', { source: { json: V2_CARD } });
        assert.ok(imported.roleId);
        await bad('import_tavern_card', { source: { json: { not: 'a card' } } });

        const exported = await good('export_tavern_card', { roleId: imported.roleId });
        assert.equal(exported.card.data.name, 'Captain Vey');
        assert.deepEqual(exported.card.data.extensions.e2e, { kept: true });
        await bad('export_tavern_card', { roleId: 'nope' });

        const lore = await good('import_tavern_worldbook', { source: { json: WORLD_INFO }, roleId });
        await bad('import_tavern_worldbook', { source: { json: WORLD_INFO, dataBase64: 'e30=' } }, 'invalid_arguments');

        const book = await good('export_tavern_worldbook', { worldbookId: lore.worldbookId });
        assert.equal(book.lorebook.name, 'Shoals');
        assert.deepEqual(book.lorebook.entries['0'], WORLD_INFO.entries[0]);
        assert.deepEqual(book.notRestored, []);
        const v3 = await good('export_tavern_worldbook', { worldbookId: lore.worldbookId, format: 'lorebook_v3' });
        assert.equal(v3.lorebook.spec, 'lorebook_v3');
        await bad('export_tavern_worldbook', { worldbookId: lore.worldbookId, format: 'gif' }, 'invalid_arguments');

        // The revisions toolset: the write_card_document above kept what it replaced.
        const revs = await good('list_revisions', { roleId });
        const docRev = revs.revisions.find((r) => r.tool === 'write_card_document');
        assert.ok(docRev, JSON.stringify(revs));
        await bad('list_revisions', { roleId, worldbookId }, 'invalid_arguments');
        assert.equal((await good('diff_revision', { revisionId: docRev.revisionId })).same, false);
        await bad('diff_revision', { revisionId: 'rv_00000000000000000000000000' }, 'revision_not_found');
        await good('restore_revision', { revisionId: docRev.revisionId });
        await bad('restore_revision', { revisionId: 'not-a-revision' }, 'invalid_arguments');
        await good('write_card_document', { roleId, sections: { description: 'Mira Vale captains the Kestrel.', personality: 'Dry.' } });

        // publish_card: an empty card is refused with its report; the ready card is submitted.
        const empty = await good('create_card', { roleName: 'Empty' });
        const refused = await bad('publish_card', { roleId: empty.roleId }, 'validation_failed');
        assert.ok(refused.detail.issues.length > 0);
        const published = await good('publish_card', { roleId });
        assert.equal(published.roleId, roleId);

        const untested = tools.map((t) => t.name).filter((n) => !ok.has(n) || !failed.has(n));
        assert.deepEqual(untested, [], 'tools without both a success and an error call in this suite');
      } finally {
        await client.close();
      }
    });

    it('lists and reads every resource template; a missing card is a clear error', async () => {
      const client = await connect(line, server);
      try {
        const { resourceTemplates } = await client.listResourceTemplates();
        assert.deepEqual(resourceTemplates.map((t) => t.uriTemplate).sort(), ['card://{roleId}', 'export://{exportId}', 'trial://{clientKey}', 'worldbook://{worldbookId}']);
        const card = (await callTool(line, client, 'create_card', { roleName: 'Read me' })).structuredContent;
        const wb = (await callTool(line, client, 'create_worldbook', { name: 'Read me too' })).structuredContent;
        await callTool(line, client, 'upsert_trial_card', { clientKey: 'e2e-read', card: { roleName: 'Read trial' } });
        for (const [uri, field, want] of [[`card://${card.roleId}`, 'roleName', 'Read me'], [`worldbook://${wb.worldbookId}`, null, null], ['trial://e2e-read', 'clientKey', 'e2e-read']]) {
          const res = await client.readResource({ uri });
          assert.equal(res.contents.length, 1, uri);
          assert.equal(res.contents[0].uri, uri);
          assert.equal(res.contents[0].mimeType, 'application/json');
          const body = JSON.parse(res.contents[0].text);
          if (field) assert.equal(body[field], want, uri);
          else assert.equal(body.worldbook.worldbookId, wb.worldbookId);
        }
        await assert.rejects(client.readResource({ uri: 'card://nope' }), (err) => {
          assert.match(err.message, /No card with this roleId exists/);
          return true;
        });
        await callTool(line, client, 'delete_trial_card', { clientKey: 'e2e-read' });
      } finally {
        await client.close();
      }
    });

    it('gets every prompt', async () => {
      const client = await connect(line, server);
      try {
        const { prompts } = await client.listPrompts();
        const args = {
          author_card: { idea: 'A lighthouse keeper on a storm coast.' },
          build_worldbook: { topic: 'The Shoals and their monsters.' },
          try_card_as_trial: { idea: 'A talking gull.' },
        };
        assert.deepEqual(prompts.map((p) => p.name).sort(), Object.keys(args).sort());
        for (const p of prompts) {
          const res = await client.getPrompt({ name: p.name, arguments: args[p.name] });
          assert.ok(res.messages.length >= 1, p.name);
          assert.equal(res.messages[0].content.type, 'text');
          assert.ok(res.messages[0].content.text.includes(Object.values(args[p.name])[0]), `${p.name} does not carry its argument`);
        }
        await assert.rejects(client.getPrompt({ name: 'author_card', arguments: {} }));
      } finally {
        await client.close();
      }
    });

    it('sets the log level, sends log notifications and progress for publish_card', async () => {
      const client = await connect(line, server);
      try {
        const logs = watchLogs(line, client);
        await setLogLevel(line, client, 'debug');
        const card = (await callTool(line, client, 'create_card', { roleName: 'Progress' })).structuredContent;
        const roleId = card.roleId;
        await callTool(line, client, 'set_opening_lines', { roleId, roleWelcome: 'Hello.' });
        await callTool(line, client, 'write_card_document', { roleId, sections: { description: 'Ready.' } });
        const progress = [];
        const res = await callTool(line, client, 'publish_card', { roleId }, { onprogress: (p) => progress.push(p) });
        assert.notEqual(res.isError, true, JSON.stringify(res.content));
        assert.ok(progress.length >= 1, 'no progress notification for publish_card');
        for (const p of progress) {
          assert.equal(p.total, 2);
          assert.ok(p.progress >= 0 && p.progress < 2);
        }
        // A log notification is tied to no request: over HTTP it may come on the session's GET
        // stream, after the response.
        for (let i = 0; i < 100 && !logs.some((l) => l.data?.tool === 'publish_card'); i++) {
          await new Promise((r) => setTimeout(r, 20));
        }
        assert.ok(logs.some((l) => l.data?.tool === 'publish_card'), `no log notification for the call: ${JSON.stringify(logs)}`);
        // Raised to error, an ordinary call sends no notice.
        await setLogLevel(line, client, 'error');
        await new Promise((r) => setTimeout(r, 100));
        const before = logs.length;
        await callTool(line, client, 'whoami', {});
        await new Promise((r) => setTimeout(r, 100));
        assert.equal(logs.length, before, `log notices below the level: ${JSON.stringify(logs.slice(before))}`);
      } finally {
        await client.close();
      }
    });

    if (transport === 'http') {
      it('reconnects to the same server and finds its work', async () => {
        const first = await connect(line, server);
        const card = (await callTool(line, first, 'create_card', { roleName: 'Survives a reconnect' })).structuredContent;
        await first.close();
        const second = await connect(line, server);
        try {
          const { tools } = await second.listTools();
          const res = await callTool(line, second, 'get_card', { roleId: card.roleId });
          assertSuccess(line, tools.find((t) => t.name === 'get_card'), res);
          assert.equal(res.structuredContent.roleName, 'Survives a reconnect');
        } finally {
          await second.close();
        }
      });
    }
  });
}

// Cancellation needs an upstream slow enough to cancel: a delaying proxy in front of a sandbox
// of its own, the server pointed at it as at the real service.
for (const { line, transport } of COMBINATIONS) {
  describe(`${LINES[line].name} over ${transport}: cancellation`, () => {
    let sandbox;
    let proxy;
    let server;
    before(async () => {
      sandbox = await startSandbox();
      proxy = await delayProxy(sandbox.apiHost, (req) => req.method === 'GET' && req.url.startsWith('/open/v1/worldbook/list'), 20000);
      server = await serverFor(transport, { args: ['--api-host', proxy.url, ...(transport === 'http' ? ['--auth', 'none'] : [])], env: { CARDWRITER_TOKEN: sandbox.token } });
    });
    after(async () => {
      await server.stop();
      await proxy.close();
      await sandbox.stop();
    });

    it('cancels a slow call, which cancels its upstream request, and goes on serving', async () => {
      const client = await connect(line, server);
      try {
        await client.listTools();
        const ac = new AbortController();
        const started = Date.now();
        const pending = callTool(line, client, 'list_worldbooks', {}, { signal: ac.signal });
        while (proxy.seen.slowStarted === 0) {
          if (Date.now() - started > 10000) throw new Error('the slow call never reached the card service');
          await new Promise((r) => setTimeout(r, 20));
        }
        ac.abort('the user changed their mind');
        await assert.rejects(pending);
        assert.ok(Date.now() - started < 10000, 'the cancelled call did not end promptly');
        // The upstream request is cancelled too (the proxy sees its client go away).
        const deadline = Date.now() + 5000;
        while (proxy.seen.slowAborted === 0 && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 20));
        }
        assert.equal(proxy.seen.slowAborted, 1, 'the upstream request was not cancelled');
        const res = await callTool(line, client, 'create_card', { roleName: 'After the cancel' });
        assert.notEqual(res.isError, true, JSON.stringify(res.content));
      } finally {
        await client.close();
      }
    });
  });
}
