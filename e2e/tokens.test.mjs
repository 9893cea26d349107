// What the tool list costs a model: the size of tools/list in bytes and in tokens of a BPE
// tokenizer (cl100k_base, js-tiktoken), as the README states it beside the tool table. The test
// fails when the README's figures are stale (UPDATE_README=1 rewrites them) and when tools/list is over
// TOOLS_LIST_BUDGET.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { getEncoding } from 'js-tiktoken';

import { connect, serverFor } from './lib/harness.mjs';
import { readmeSection } from './lib/readme.mjs';

const BEGIN = '<!-- tokens:begin -->';
const END = '<!-- tokens:end -->';

/** Measures tools/list of a server started with args. */
async function measure(args) {
  const server = await serverFor('stdio', { args });
  const client = await connect('v1', server);
  try {
    const result = await client.listTools();
    const json = JSON.stringify(result);
    const enc = getEncoding('cl100k_base');
    const perTool = result.tools.map((t) => enc.encode(JSON.stringify(t)).length);
    // What a host passes its model of each tool: name, description and input schema (Claude Code's
    // input_schema, Gemini CLI's parametersJsonSchema); output schemas and annotations stay with the host.
    const seen = JSON.stringify(result.tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema })));
    return {
      tools: result.tools.length,
      bytes: Buffer.byteLength(json),
      tokens: enc.encode(json).length,
      seen: enc.encode(seen).length,
      largest: Math.max(...perTool),
      largestName: result.tools[perTool.indexOf(Math.max(...perTool))].name,
    };
  } finally {
    await client.close();
  }
}

// Every host that loads all the tools pays tools/list on every turn: it stays within this many
// tokens, new tools included.
const TOOLS_LIST_BUDGET = 12000;

it('the README states what tools/list costs in tokens', async () => {
  const all = await measure(['--sandbox']);
  assert.ok(all.tokens <= TOOLS_LIST_BUDGET,
    `tools/list is ${all.tokens} tokens, over its budget of ${TOOLS_LIST_BUDGET}: say less where the schema already says it`);
  const readOnly = await measure(['--sandbox', '--read-only']);
  const dynamic = await measure(['--sandbox', '--dynamic-toolsets']);
  const kb = (n) => (n / 1024).toFixed(1);
  const text = [
    BEGIN,
    `\`tools/list\` with all ${all.tools} tools is ${kb(all.bytes)} KiB of JSON, **${all.tokens.toLocaleString('en-US')} tokens** ` +
      `(cl100k_base, measured by \`e2e/tokens.test.mjs\`, which holds it at or under ${TOOLS_LIST_BUDGET.toLocaleString('en-US')}); the largest tool is \`${all.largestName}\` ` +
      `(${all.largest.toLocaleString('en-US')} tokens). What a model sees of it (each tool's name, description and input schema, ` +
      `as hosts pass them on: no output schemas) is **${all.seen.toLocaleString('en-US')} tokens**; what each host sends per request ` +
      `is in the author tasks table below. With \`--read-only\` (${readOnly.tools} tools): ` +
      `${kb(readOnly.bytes)} KiB, ${readOnly.tokens.toLocaleString('en-US')} tokens. With \`--dynamic-toolsets\` (stdio) the server ` +
      `starts with ${dynamic.tools} tools: ${kb(dynamic.bytes)} KiB, **${dynamic.tokens.toLocaleString('en-US')} tokens**, and the model ` +
      `loads a toolset when it needs it. \`--toolsets\` and \`--tools\` trim it further.`,
    END,
  ].join('\n');
  readmeSection(BEGIN, END, text, { rerun: 'UPDATE_README=1 bash e2e/run tokens.test.mjs' });
});
