// Confirmations as the hosts people run meet them, driven by the official TypeScript SDK
// clients over stdio: a host that cancels the question unseen within milliseconds (headless
// Claude Code, `claude -p`), a client that declares only URL-mode elicitation, and the
// operator's --confirm=conversation. In each, publish_card and delete_trial_card do nothing
// until the author confirms, say so truthfully, and go ahead with the one-time
// confirmationToken; a token is good once, for its own arguments.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';

import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { connect, callTool, assertToolError, serverFor } from './lib/harness.mjs';

/** Connects line to a sandbox server with args, answering elicitations with answer (null: no handler). */
async function open(line, args, capabilities, answer) {
  const server = await serverFor('stdio', { args: ['--sandbox', ...args] });
  const client = await connect(line, server, { capabilities });
  const asked = [];
  if (answer) {
    const handler = (req) => { asked.push(req.params); return answer; };
    if (line === 'v1') client.setRequestHandler(ElicitRequestSchema, handler);
    else client.setRequestHandler('elicitation/create', handler);
  }
  const call = async (name, args) => callTool(line, client, name, args);
  const ok = async (name, args) => {
    const res = await call(name, args);
    assert.ok(!res.isError, `${name}: ${JSON.stringify(res.content)}`);
    return res.structuredContent;
  };
  return { client, asked, call, ok };
}

/** A card ready to publish. */
async function ready(s, name) {
  const { roleId } = await s.ok('create_card', { roleName: name });
  await s.ok('set_opening_lines', { roleId, roleWelcome: 'Hello.' });
  await s.ok('write_card_document', { roleId, sections: { description: 'Ready.' } });
  return roleId;
}

const cases = [
  { name: 'a host that cancels unseen (headless Claude Code)', line: 'v1', caps: { elicitation: {} }, answer: { action: 'cancel' }, asks: true, says: /not shown/ },
  { name: 'a host that cancels unseen, 2026-07-28', line: 'v2m', caps: { elicitation: { form: {} } }, answer: { action: 'cancel' }, asks: true, says: /not shown/ },
  { name: 'a client declaring only URL-mode elicitation', line: 'v1', caps: { elicitation: { url: {} } }, answer: { action: 'accept', content: { confirm: true } }, asks: false, says: /only URL-mode/ },
  { name: '--confirm=conversation', line: 'v1', args: ['--confirm', 'conversation'], caps: { elicitation: {} }, answer: { action: 'accept', content: { confirm: true } }, asks: false, says: /ask the author/ },
];

describe('confirmations reach the author in every host', () => {
  for (const c of cases) {
    it(c.name, async () => {
      const s = await open(c.line, c.args ?? [], c.caps, c.answer);
      try {
        const roleId = await ready(s, 'Ready');
        const other = await ready(s, 'Other');
        await s.ok('upsert_trial_card', { clientKey: 'try-1', card: { roleName: 'Try' } });
        for (const [tool, args] of [['publish_card', { roleId }], ['delete_trial_card', { clientKey: 'try-1' }]]) {
          const env = assertToolError(tool, await s.call(tool, args), 'confirmation_required');
          assert.match(env.message, c.says);
          assert.doesNotMatch(env.message, /the user cancelled/);
          const token = env.detail.confirmationToken;
          assert.ok(env.message.includes(token), `${tool}: the token is not in the message the model reads`);
          if (tool === 'publish_card') {
            assertToolError(tool, await s.call(tool, { roleId: other, confirmationToken: token }), 'confirmation_invalid');
          }
          await s.ok(tool, { ...args, confirmationToken: token });
          const again = assertToolError(tool, await s.call(tool, { ...args, confirmationToken: token }), 'confirmation_invalid');
          assert.match(again.message, /already used/);
        }
        assert.equal((await s.ok('get_card', { roleId })).reviewStatus !== 'draft', true);
        assert.equal((await s.ok('list_trial_cards', {})).list.length, 0);
        assert.equal(s.asked.length > 0, c.asks, `forms sent: ${JSON.stringify(s.asked)}`);
        for (const q of s.asked) assert.notEqual(q.mode, 'url');
      } finally {
        await s.client.close();
      }
    });
  }
});
