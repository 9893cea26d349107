// Every schema a host's validator takes without a word: the tool list of the built binary
// compiled by ajv as hosts run it (Gemini CLI and the TypeScript SDK validate tool arguments and
// results with ajv, whose default "strict" mode logs warnings such as type keywords beside an
// anyOf that names no type), for draft-07 and 2020-12 alike, and with strictTypes raised to an
// error. A warning printed on every call is noise in the user's terminal and a sign the schema
// is read differently than meant.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

import { connect, serverFor } from './lib/harness.mjs';

// ajv comes with the official SDK (its own validator), as it does in every host built on it.
const require = createRequire(import.meta.url);
const Ajv = require('ajv').default;
const Ajv2020 = require('ajv/dist/2020').default;

it('every tool schema compiles under ajv with no strict-mode warning', async () => {
  const server = await serverFor('stdio');
  const client = await connect('v1', server);
  try {
    const { tools } = await client.listTools();
    assert.ok(tools.length > 0);
    const found = [];
    for (const tool of tools) {
      for (const [which, schema] of [['input', tool.inputSchema], ['output', tool.outputSchema]]) {
        if (!schema) continue;
        for (const [draft, A, options] of [
          ['draft-07 (default options)', Ajv, {}],
          ['2020-12 (default options)', Ajv2020, {}],
          ['2020-12 (strictTypes: true)', Ajv2020, { strictTypes: true }],
        ]) {
          const warnings = [];
          const logger = { log() {}, warn: (...a) => warnings.push(a.join(' ')), error: (...a) => warnings.push(a.join(' ')) };
          const ajv = new A({ allErrors: true, logger, ...options });
          const { $schema, ...body } = schema;
          try {
            ajv.compile(body);
          } catch (e) {
            warnings.push(String(e.message));
          }
          for (const w of warnings) found.push(`${tool.name} ${which} schema, ${draft}: ${w}`);
        }
      }
    }
    assert.deepEqual(found, [], found.join('\n'));
  } finally {
    await client.close();
  }
});
