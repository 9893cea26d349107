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

import { callTool, connect, serverFor } from './lib/harness.mjs';
import { HOSTS, hostHome, missing, printed } from './lib/hosts.mjs';
import { startModel } from './lib/standin-model.mjs';

const WELCOME = '"You\'re late, pilot," the captain says.';

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
          h = hostHome(host, model);
        });
        after(async () => {
          await model?.close();
          await server?.stop();
          h?.remove();
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
