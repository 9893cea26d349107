// Tokens per task as a performance figure: two fixed tasks (e2e/lib/tasks.mjs) run by the
// official TypeScript SDK client over stdio and over HTTP, and the cl100k_base tokens the model
// reads back, both as Claude Code hands results over (structuredContent) and as Gemini CLI does
// (the text). README.md and BENCH.md state the figures between markers (BENCH.md beside those
// before issue 22); the test fails when they are stale, and UPDATE_README=1 rewrites them.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

import { connect, serverFor, callTool } from './lib/harness.mjs';
import { Tally, authoringTask, makeBigWorldbook, bigWorldbookTask, findByQuery } from './lib/tasks.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BEGIN = '<!-- task-tokens:begin -->';
const END = '<!-- task-tokens:end -->';

// Measured on the commit before issue 22 (327e56f) with the same tasks and tokenizer; the
// 1,000-entry task there finds the entry by reading every entry (no query, no pages).
const BEFORE = { authoring: { text: 6947, structured: 5782 }, big: { text: 287274, structured: 287221 } };

// The result budget the server runs with by default (tools.DefaultResultBudget).
const BUDGET = 10000;

/** Runs both tasks on one transport; returns their tallies. */
async function runTasks(transport) {
  const server = await serverFor(transport, { args: ['--sandbox'] });
  const client = await connect('v1', server);
  try {
    const call = (name, args) => callTool('v1', client, name, args);
    const authoring = new Tally(call);
    await authoringTask(authoring);
    const worldbookId = await makeBigWorldbook(call);
    const big = new Tally(call);
    await bigWorldbookTask(big, worldbookId, findByQuery);
    return { authoring, big };
  } finally {
    await client.close();
    await server.stop();
  }
}

const n = (x) => x.toLocaleString('en-US');
const pct = (now, then) => `${Math.round((100 * now) / then)}%`;

/**
 * The figures as the README states them (now only) and as BENCH.md does (history: beside the
 * figures measured before issue 22).
 */
function figures({ authoring, big }, history) {
  const rows = history
    ? [
        '| Task (measured by `e2e/tasks.test.mjs`, cl100k_base) | Calls | Tokens read back: structuredContent (Claude Code) | Text (Gemini CLI) | Before issue 22 (structured / text) |',
        '|---|---|---|---|---|',
        `| Author a card: create, opening lines, three sections, a 20-entry worldbook, validate, review, read back, export | ${authoring.calls} | ` +
          `**${n(authoring.structured)}** (${pct(authoring.structured, BEFORE.authoring.structured)}) | **${n(authoring.text)}** (${pct(authoring.text, BEFORE.authoring.text)}) | ` +
          `${n(BEFORE.authoring.structured)} / ${n(BEFORE.authoring.text)} |`,
        `| On a 1,000-entry worldbook: find an entry by query, change it, check what fires | ${big.calls} | ` +
          `**${n(big.structured)}** | **${n(big.text)}** | ${n(BEFORE.big.structured)} / ${n(BEFORE.big.text)} (every entry read to find one) |`,
      ]
    : [
        '| Task (measured by `e2e/tasks.test.mjs`, cl100k_base) | Calls | Tokens read back: structuredContent (Claude Code) | Text (Gemini CLI) |',
        '|---|---|---|---|',
        `| Author a card: create, opening lines, three sections, a 20-entry worldbook, validate, review, read back, export | ${authoring.calls} | **${n(authoring.structured)}** | **${n(authoring.text)}** |`,
        `| On a 1,000-entry worldbook: find an entry by query, change it, check what fires | ${big.calls} | **${n(big.structured)}** | **${n(big.text)}** |`,
      ];
  return [
    BEGIN,
    ...rows,
    '',
    `The largest result of the authoring task is \`${authoring.largest.tool}\` (${n(authoring.largest.tokens)} tokens).`,
    END,
  ].join('\n');
}

/** Checks (or with UPDATE_README=1 rewrites) the marked section of a file. */
function checkSection(file, text) {
  const path = join(ROOT, file);
  const doc = readFileSync(path, 'utf8');
  const start = doc.indexOf(BEGIN);
  const end = doc.indexOf(END);
  assert.ok(start >= 0 && end > start, `${file} has no ${BEGIN} ... ${END} section`);
  if (process.env.UPDATE_README) {
    writeFileSync(path, doc.slice(0, start) + text + doc.slice(end + END.length));
    return;
  }
  assert.equal(doc.slice(start, end + END.length), text, `${file}'s task token figures are stale: rerun with UPDATE_README=1 bash e2e/run tasks.test.mjs`);
}

describe('tokens per task', () => {
  const runs = {};
  before(async () => {
    runs.stdio = await runTasks('stdio');
    runs.http = await runTasks('http');
  });
  after(() => {});

  it('reads back the same over stdio and HTTP', () => {
    for (const task of ['authoring', 'big']) {
      assert.deepEqual([runs.http[task].text, runs.http[task].structured], [runs.stdio[task].text, runs.stdio[task].structured], task);
    }
  });

  it('keeps every result of the tasks within the budget', () => {
    for (const t of Object.values(runs)) {
      assert.ok(t.big.largest.tokens <= BUDGET, `1,000-entry task: ${t.big.largest.tool} ${t.big.largest.tokens} tokens`);
      assert.ok(t.authoring.largest.tokens <= BUDGET, `authoring: ${t.authoring.largest.tool} ${t.authoring.largest.tokens} tokens`);
    }
  });

  it('the README and BENCH.md state the figures', () => {
    checkSection('README.md', figures(runs.stdio, false));
    checkSection('BENCH.md', figures(runs.stdio, true));
  });
});
