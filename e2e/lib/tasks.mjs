// Two fixed tasks a model does with cardwriter-mcp, and what it reads back: the cl100k_base
// tokens of each result as a host hands it to the model, both ways hosts do (Claude Code: the
// structuredContent JSON when there is one, else the text; Gemini CLI: the text). Used by
// e2e/tasks.test.mjs, which writes the figures into README.md and BENCH.md.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { getEncoding } from 'js-tiktoken';

const enc = getEncoding('cl100k_base');

/**
 * What varies from run to run in a result (the sandbox's random ids, times, cursors) replaced by
 * values of the same shape fixed by their order of appearance, so that the figures are the same
 * on every run.
 */
export function steady(s, names) {
  const fixed = (v) => {
    if (!names.has(v)) names.set(v, createHash('sha256').update(`steady ${names.size}`).digest('hex'));
    return names.get(v);
  };
  return s
    .replace(/\b([a-z]+_)([0-9a-f]{24})\b/g, (_, p, v) => p + fixed(v).slice(0, 24))
    // revision ids: rv_ and 26 base32hex digits (time first)
    .replace(/\brv_([0-9a-v]{26})\b/g, (_, v) => 'rv_' + fixed(v).slice(0, 26))
    .replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})/g, '2026-01-02T03:04:05Z')
    .replace(/"(nextCursor|cursor)":"[A-Za-z0-9_-]+"/g, (_, k) => `"${k}":"${fixed(k).slice(0, 40)}"`);
}

/** The cl100k_base tokens of a text. */
export function tokens(text) {
  return enc.encode(text).length;
}

/** A result's size as each kind of host reads it (names: the run's map of varying values). */
export function resultTokens(res, names = new Map()) {
  const text = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
  const other = (res.content ?? []).filter((c) => c.type !== 'text').map((c) => JSON.stringify(c)).join('\n');
  const textTokens = enc.encode(steady(text + other, names)).length;
  const structured = res.structuredContent === undefined ? textTokens : enc.encode(steady(JSON.stringify(res.structuredContent), names)).length;
  return { text: textTokens, structured, chars: Math.max(text.length, JSON.stringify(res.structuredContent ?? '').length) };
}

/** A tally of the tokens read back by a task's calls. */
export class Tally {
  constructor(call) {
    this.raw = call;
    this.text = 0;
    this.structured = 0;
    this.calls = 0;
    this.largest = { tokens: 0, tool: '' };
    this.names = new Map();
  }

  /** Calls a tool that must succeed and counts its result. */
  async call(name, args) {
    const res = await this.raw(name, args);
    assert.notEqual(res.isError, true, `${name}: ${JSON.stringify(res.content).slice(0, 500)}`);
    const t = resultTokens(res, this.names);
    this.text += t.text;
    this.structured += t.structured;
    this.calls++;
    if (Math.max(t.text, t.structured) > this.largest.tokens) this.largest = { tokens: Math.max(t.text, t.structured), tool: name };
    return res.structuredContent ?? {};
  }
}

/** The 20 entries of the authoring task's worldbook. */
export function twentyEntries() {
  const places = ['the Kestrel', 'Vale Gate', 'Port Ossian', 'the Drift', 'Corvin Station', 'the Ashen Belt', 'Halcyon Reach',
    'the Lantern Fleet', 'Mira\'s debt', 'the Syndicate', 'Dock Nine', 'the Long Quiet', 'Tessaly', 'the Old Beacon',
    'Karst Moon', 'the Iron Choir', 'Salvage Court', 'the Weeping Nebula', 'Captain Orrin', 'the Blind Cartographer'];
  return places.map((name, i) => ({
    op: 'create',
    name,
    content: `${name} is part of the sector Mira flies through: ${['a place of old debts', 'where the gate lights flicker', 'a market that never sleeps',
      'quiet and dangerous', 'run by careful people'][i % 5]}. Mention it when the chat turns to ${name.replace(/^the /, '')}, and keep its ` +
      'details consistent with the rest of the sector.',
    keywords: [name.replace(/^the /, ''), `kw${i}`],
  }));
}

/**
 * The fixed authoring task of issue 22: create a card, its opening lines, three sections, a
 * 20-entry worldbook bound to it, validate, review, read back (card and entries), export.
 */
export async function authoringTask(tally) {
  const card = await tally.call('create_card', { roleName: 'Mira Vey', language: 'en' });
  const roleId = card.roleId;
  await tally.call('set_opening_lines', {
    roleId,
    roleWelcome: '*The Kestrel shudders as it drops out of the jump gate.* "You\'re late, pilot. Strap in."',
    alternates: ['"Another stowaway? Fine. Sit down and touch nothing."'],
    prologue: ['I\'m here about the job.', 'Who are you?'],
  });
  await tally.call('write_card_document', {
    roleId,
    sections: {
      description: 'Mira Vey is the captain of the Kestrel, a battered freighter. She is forty, sharp-eyed, and owes the Syndicate more than the ship is worth.',
      personality: 'Dry, loyal, tired, and quick to laugh when nobody expects it.',
      scenario: 'The player has just signed on as the Kestrel\'s pilot, days before a run through the Ashen Belt.',
    },
  });
  const wb = await tally.call('create_worldbook', { name: 'The Kestrel\'s Sector', description: 'Places and people around the Kestrel.' });
  await tally.call('write_worldbook_document', { worldbookId: wb.worldbookId, entries: twentyEntries(), binding: { roleId } });
  await tally.call('validate_card', { roleId });
  await tally.call('review_card', { roleId });
  await tally.call('get_card', { roleId });
  await tally.call('list_worldbook_entries', { worldbookId: wb.worldbookId });
  await tally.call('export_tavern_card', { roleId });
  return { roleId, worldbookId: wb.worldbookId };
}

/** About 800 characters of lore for generated entry i. */
export function loreEntry(i) {
  const words = ('the old harbour keeps a lantern for every ship lost at sea and the keepers say the light answers when a name is ' +
    'spoken aloud beneath the cliffs where salt wind carves the stone into faces that the fishermen greet each morning before ' +
    'the tide turns toward the northern reefs').split(' ');
  let content = '';
  for (let w = 0; content.length < 800; w++) content += words[(i * 7 + w * 3) % words.length] + ' ';
  return { op: 'create', name: `Place ${String(i).padStart(4, '0')}`, content: content.trim(),
    keywords: [`place${String(i).padStart(4, '0')}`, `${words[i % words.length]}-${i % 97}`], secondaryKeywords: ['harbour'], category: 'places' };
}

/** The planted entry of the 1,000-entry worldbook, which the task finds by query. */
export const PLANTED = { op: 'create', name: 'Ilse', content: 'The blind cartographer of the old harbour draws the reefs by the sound of the waves.',
  keywords: ['Ilse', 'mapmaker'] };

/** Creates a worldbook of n generated entries, the planted one at plantAt; returns its id. Not counted. */
export async function makeBigWorldbook(call, n = 1000, plantAt = 637) {
  const wb = (await call('create_worldbook', { name: 'Generated' })).structuredContent;
  for (let start = 0; start < n; start += 500) {
    const entries = [];
    for (let i = start; i < Math.min(start + 500, n); i++) entries.push(i === plantAt ? PLANTED : loreEntry(i));
    const res = await call('write_worldbook_document', { worldbookId: wb.worldbookId, entries });
    assert.notEqual(res.isError, true, JSON.stringify(res.content).slice(0, 300));
  }
  return wb.worldbookId;
}

/**
 * The task on a 1,000-entry worldbook: find the entry about the blind cartographer, change it,
 * check what fires. find(worldbookId) returns the entry's id the way the server allows.
 */
export async function bigWorldbookTask(tally, worldbookId, find) {
  const entryId = await find(tally, worldbookId);
  await tally.call('write_worldbook_document', { worldbookId, entries: [{ op: 'update', entryId, content: 'The blind cartographer of the old harbour, Ilse, maps the reefs by ear and sells her charts at dawn.' }] });
  const fired = await tally.call('test_worldbook_triggers', { worldbookId, text: 'We ask Ilse for a chart of the reefs.' });
  assert.ok(fired.fired.some((f) => f.entryId === entryId), 'the changed entry does not fire');
  return entryId;
}

/** Finds the planted entry with query (this server). */
export async function findByQuery(tally, worldbookId) {
  const out = await tally.call('list_worldbook_entries', { worldbookId, query: 'blind cartographer' });
  assert.equal(out.entries[0].name, 'Ilse', 'query did not find the planted entry first');
  return out.entries[0].entryId;
}

/** Finds the planted entry by reading every entry (a server without query or pages). */
export async function findByReadingAll(tally, worldbookId) {
  const out = await tally.call('list_worldbook_entries', { worldbookId });
  const e = out.entries.find((x) => x.content.includes('blind cartographer'));
  assert.ok(e, 'the planted entry is not in the list');
  return e.entryId;
}
