// Dynamic toolsets (stdio --dynamic-toolsets), driven by both lines of the official TypeScript
// SDK as hosts drive them: the server starts with the cards toolset and list_toolsets and
// enable_toolset; enabling a toolset makes the server send notifications/tools/list_changed, after
// which the host lists the tools again and the new ones can be called.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';

import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

import { LINES, assertSuccess, assertToolError, callTool, connect, serverFor } from './lib/harness.mjs';

for (const line of ['v1', 'v2', 'v2m']) {
  describe(`${LINES[line].name}: dynamic toolsets over stdio`, () => {
    it('starts small, loads a toolset by a call, and tells the host the list changed', async () => {
      const server = await serverFor('stdio', { args: ['--sandbox', '--dynamic-toolsets'] });
      const client = await connect(line, server);
      try {
        let changed = 0;
        if (line === 'v1') client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed++; });
        else client.setNotificationHandler('notifications/tools/list_changed', () => { changed++; });
        const names = async () => (await client.listTools()).tools;
        const start = await names();
        assert.deepEqual(start.map((t) => t.name).sort(), ['enable_toolset', 'get_card', 'list_toolsets', 'whoami']);
        const byName = Object.fromEntries(start.map((t) => [t.name, t]));

        const sets = assertSuccess(line, byName.list_toolsets, await callTool(line, client, 'list_toolsets', {}));
        assert.deepEqual(sets.toolsets.map((s) => s.name), ['cards', 'authoring', 'worldbook', 'trial', 'tavern', 'revisions']);
        assert.deepEqual(sets.toolsets.filter((s) => s.enabled).map((s) => s.name), ['cards']);

        const enabled = assertSuccess(line, byName.enable_toolset, await callTool(line, client, 'enable_toolset', { toolset: 'authoring' }));
        assert.ok(enabled.tools.includes('create_card'));
        for (let i = 0; i < 100 && changed === 0; i++) await new Promise((r) => setTimeout(r, 20));
        assert.equal(changed, 1, 'no notifications/tools/list_changed');
        const after = await names();
        const create = after.find((t) => t.name === 'create_card');
        assert.ok(create, 'create_card is not listed after enabling authoring');
        assertSuccess(line, create, await callTool(line, client, 'create_card', { roleName: 'Loaded on demand' }));
        assertToolError('enable_toolset', await callTool(line, client, 'enable_toolset', { toolset: 'nope' }), 'invalid_arguments');
      } finally {
        await client.close();
        await server.stop();
      }
    });
  });
}
