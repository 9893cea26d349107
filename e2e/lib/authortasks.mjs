// The author tasks of the task suite (e2e/authortasks.test.mjs): each is what an author asks in
// their own words, the state the test sets up first (through the server's tools, as the author
// left it), the stand-in model's steps (lib/script.mjs: every id and fact from what the host
// passed back or from the author's words), and the end state checked afterwards through the
// tools, by a client of the test's own. needs names the features a task cannot pass without,
// from the branches of issues 30 and 31, each detected in the server the suite runs (feature()).
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { fileText } from './script.mjs';
import { loreEntry, PLANTED } from './tasks.mjs';

const REAL = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'internal', 'tavern', 'taverntest', 'real');

/** The card JSON in a PNG's chara tEXt chunk (SillyTavern's Seraphina, as a JSON card file). */
export function charaOf(png) {
  for (let off = 8; off + 12 <= png.length;) {
    const len = png.readUInt32BE(off);
    if (png.toString('latin1', off + 4, off + 8) === 'tEXt') {
      const d = png.subarray(off + 8, off + 8 + len);
      const z = d.indexOf(0);
      if (d.toString('latin1', 0, z) === 'chara') return Buffer.from(d.toString('latin1', z + 1), 'base64').toString('utf8');
    }
    off += 12 + len;
  }
  throw new Error('no chara chunk');
}

/**
 * The features tasks depend on that other branches bring, and how the suite sees them in the
 * tools the server lists (tools: name -> tool of tools/list).
 */
export const FEATURES = {
  ifVersion: { by: 'issue 30 (i30-versions): version on reads, ifVersion/stale_write on writes', has: (t) => 'ifVersion' in (t.set_opening_lines?.inputSchema.properties ?? {}) },
  restoreAsksNothing: { by: 'issue 30/31: restore_revision asks no confirmation', has: (t) => !/asks the user/i.test(t.restore_revision?.description ?? 'asks the user') },
  confirmToken: { by: 'issue 31 (i31-server): --confirm conversation tokens (confirmationToken)', has: (t) => 'confirmationToken' in (t.publish_card?.inputSchema.properties ?? {}) },
  downloadUrl: { by: 'issue 31 (i31-server): exports carry link.downloadUrl over HTTP', has: (t) => 'downloadUrl' in (t.export_tavern_card?.outputSchema?.properties?.link?.properties ?? {}) },
};

/** An argument the host declares for tool (the model sends only what it is offered). */
const offers = (s, tool, arg) => arg in (s.schemas[tool]?.properties ?? {});
/** ifVersion from a read's version, when the tool takes it. */
const guard = (s, tool, read) => (offers(s, tool, 'ifVersion') && read?.version ? { ifVersion: read.version } : {});
/** A confirmationToken anywhere in a result's data (a success's field, or an error's detail). */
function tokenIn(v) {
  if (!v || typeof v !== 'object') return undefined;
  if (typeof v.confirmationToken === 'string') return v.confirmationToken;
  for (const x of Object.values(v)) {
    const t = tokenIn(x);
    if (t) return t;
  }
  return undefined;
}
/**
 * A call that resends with the confirmationToken a result asked for (the author said yes in
 * their words already), once.
 */
const confirmed = (tool, as) => ({
  if: (s) => tokenIn(s.r[as].data) !== undefined,
  then: [{ call: tool, args: (s) => ({ ...s.r[as].args, confirmationToken: tokenIn(s.r[as].data) }), as }],
});
/** The steps that import the file the author named: by path, else read and sent as JSON. */
const importFile = (tool, path, extra, as) => [
  { call: tool, args: (s) => ({ source: { path: path(s) }, ...extra(s) }), as },
  {
    if: (s) => s.r[as].failed,
    then: [
      { read: path, as: 'file', whole: true },
      { call: tool, args: (s) => ({ source: { json: fileText(s.r.file) }, ...extra(s) }), as },
    ],
  },
];
const fail = (s, what) => {
  throw new Error(`${what}: ${s.last?.shown.slice(0, 600)}`);
};

/**
 * A filler entry of the 1,000-entry worldbook: the same words in each but its number, so that
 * whichever of the entries a search ranks alike it shows, the figures are the same.
 */
function lantern(i) {
  const n = String(i).padStart(4, '0');
  return { op: 'create', name: `Lantern ${n}`, content: 'A lantern of the old harbour keeps the name of a ship lost at sea; the keepers light it when the tide turns.',
    keywords: [`lantern${n}`], secondaryKeywords: ['harbour'], category: 'places' };
}

const W0 = '*The cargo hold smells of rust.* "You\'re the new pilot? Don\'t touch anything."';
const W1 = '"Welcome aboard the Kestrel," Mira says, without looking up from the charts.';
const W2 = '"You\'re late," Mira says. "Strap in."';

/** The author tasks. */
export const TASKS = [
  {
    id: 'import-fix',
    title: 'Import a real card file (SillyTavern\'s Seraphina) and fix what `validate_card` and `review_card` report',
    async setup({ home }) {
      writeFileSync(join(home, 'Seraphina.json'), charaOf(readFileSync(join(REAL, 'default_Seraphina.png'))));
      return {};
    },
    prompt: ({ home }) => `Import my card file ${join(home, 'Seraphina.json')}, then check it and fix whatever the checks complain about.`,
    // Over HTTP the file reaches the server only through the model; Gemini CLI's read_file cuts
    // every line at 2,000 characters (this file is one line of 13,507), so it reads it whole
    // through its shell (readWhole).
    steps: [
      ...importFile('import_tavern_card', (s) => s.fact(/card file (\S+\.json)/), () => ({}), 'imp'),
      { if: (s) => s.r.imp.failed, then: [{ say: (s) => fail(s, 'the import failed') }] },
      { call: 'validate_card', args: (s) => ({ roleId: s.r.imp.data.roleId }), as: 'val' },
      { call: 'review_card', args: (s) => ({ roleId: s.r.imp.data.roleId }), as: 'rev' },
      { call: 'get_card', args: (s) => ({ roleId: s.r.imp.data.roleId }), as: 'card' },
      {
        if: (s) => s.r.val.data.issues.some((i) => i.field === 'tags'),
        then: [{ call: 'update_card_profile', args: (s) => ({ roleId: s.r.card.data.roleId, tags: ['fantasy', 'forest', 'guardian'], ...guard(s, 'update_card_profile', s.r.card.data) }), as: 'tags' }],
      },
      {
        if: (s) => s.r.val.data.issues.some((i) => i.field === 'prologue'),
        then: [
          { call: 'get_card', args: (s) => ({ roleId: s.r.card.data.roleId }), as: 'card' },
          {
            call: 'set_opening_lines',
            args: (s) => ({ roleId: s.r.card.data.roleId, roleWelcome: s.r.card.data.roleWelcome, alternates: s.r.card.data.welcomeAlternates ?? [],
              prologue: ['Where am I?', 'Thank you for finding me.'], ...guard(s, 'set_opening_lines', s.r.card.data) }),
            as: 'lines',
          },
        ],
      },
      {
        if: (s) => s.r.rev.data.findings.some((f) => /^sections\.\w+$/.test(f.field) && /empty/.test(f.message)),
        then: [
          { call: 'get_card', args: (s) => ({ roleId: s.r.card.data.roleId }), as: 'card' },
          {
            call: 'write_card_document',
            args: (s) => {
              const written = {
                personality: 'Gentle, protective and patient; fierce only when someone in her glade is threatened.',
                scenario: '{{user}} wakes in Seraphina\'s glade after she found them wounded in the forest of Eldoria.',
                exampleDialogue: '<START>\n{{user}}: "Who are you?"\n{{char}}: *She smiles softly.* "Seraphina, the guardian of this forest."',
              };
              const empty = s.r.rev.data.findings.filter((f) => /empty/.test(f.message)).map((f) => f.field.replace('sections.', ''));
              return { roleId: s.r.card.data.roleId, sections: Object.fromEntries(empty.filter((k) => k in written).map((k) => [k, written[k]])),
                ...guard(s, 'write_card_document', s.r.card.data) };
            },
            as: 'doc',
          },
        ],
      },
      { call: 'validate_card', args: (s) => ({ roleId: s.r.imp.data.roleId }), as: 'after' },
      { say: (s) => `Imported ${s.r.imp.data.roleName} (${s.r.imp.data.roleId}) and fixed what I could. Still open: ${s.r.after.data.issues.map((i) => i.message).join(' ') || 'nothing'}` },
    ],
    async verify({ svc, said }) {
      const roleId = said.match(/\((r_[0-9a-f]+)\)/)?.[1];
      assert.ok(roleId, `the model did not name the card: ${said}`);
      const card = await svc.call('get_card', { roleId });
      assert.equal(card.roleName, 'Seraphina');
      const val = await svc.call('validate_card', { roleId });
      assert.deepEqual(val.issues.map((i) => i.field).filter((f) => f !== 'avatarImageId'), [], 'validate_card still reports text issues');
      const rev = await svc.call('review_card', { roleId });
      const empty = rev.findings.filter((f) => /^sections\./.test(f.field) && /empty/.test(f.message));
      assert.deepEqual(empty, [], 'review_card still finds empty sections');
    },
  },
  {
    id: 'greeting',
    title: 'Rewrite the greeting and add two alternates',
    async setup({ svc }) {
      const { roleId } = await svc.call('create_card', { roleName: 'Captain Mira Vale' });
      await svc.call('write_card_document', { roleId, sections: { description: 'Mira Vale captains the Kestrel, a battered freighter.' } });
      await svc.call('set_opening_lines', { roleId, roleWelcome: W0, prologue: ['I\'m here about the job.'] });
      return { roleId };
    },
    prompt: ({ roleId }) => `Rewrite the greeting of my card ${roleId} so it opens on the Kestrel's bridge, and add two alternate greetings.`,
    steps: [
      { call: 'get_card', args: (s) => ({ roleId: s.fact(/card (r_[0-9a-f]+)/) }), as: 'card' },
      {
        call: 'set_opening_lines',
        args: (s) => ({
          roleId: s.r.card.data.roleId,
          roleWelcome: '*The bridge of the Kestrel hums as the stars streak past.* "Pilot. Good. Take the helm before she shakes apart."',
          alternates: [...(s.r.card.data.welcomeAlternates ?? []), '"The bridge is yours tonight, pilot."', '*Mira taps the cracked viewport.* "See that? That\'s our way out."'],
          prologue: s.r.card.data.prologue ?? [],
          ...guard(s, 'set_opening_lines', s.r.card.data),
        }),
        as: 'set',
      },
      { if: (s) => s.r.set.failed, then: [{ say: (s) => fail(s, 'set_opening_lines failed') }] },
      { say: () => 'The greeting now opens on the bridge, with two alternates.' },
    ],
    async verify({ svc, facts }) {
      const card = await svc.call('get_card', { roleId: facts.roleId });
      assert.match(card.roleWelcome, /bridge of the Kestrel/);
      assert.equal(card.welcomeAlternates.length, 2);
      assert.deepEqual(card.prologue, ['I\'m here about the job.'], 'the prologue was lost');
    },
  },
  {
    id: 'lore-five',
    title: 'Add five lorebook entries and show a passage fires them',
    async setup({ svc }) {
      const { worldbookId } = await svc.call('create_worldbook', { name: 'The Kestrel\'s Sector' });
      return { worldbookId };
    },
    prompt: ({ worldbookId }) => `Add five entries to my worldbook ${worldbookId}: Port Ossian, the Syndicate, Dock Nine, the Ashen Belt and Corvin Station. Then show me a passage that fires them.`,
    steps: [
      {
        call: 'write_worldbook_document',
        args: (s) => {
          s.names = s.fact(/: ([^.]+)\. Then/).split(/, | and /).map((n) => n.trim());
          return {
            worldbookId: s.fact(/worldbook (wb_[0-9a-f]+)/),
            entries: s.names.map((name) => ({ op: 'create', name, content: `${name} is a place the crew of the Kestrel knows well; mention it when it comes up.`, keywords: [name.replace(/^the /, '')] })),
          };
        },
        as: 'write',
      },
      {
        call: 'test_worldbook_triggers',
        args: (s) => {
          s.passage = `We left Port Ossian at dawn, dodged the Syndicate at Dock Nine, crossed the Ashen Belt and docked at Corvin Station.`;
          return { worldbookId: s.r.write.args.worldbookId, text: s.passage };
        },
        as: 'fired',
      },
      {
        say: (s) => {
          const fired = s.r.fired.data.fired ?? [];
          if (fired.length < 5) fail(s, `only ${fired.length} entries fired`);
          return `Added ${s.names.join(', ')}. This passage fires all five: "${s.passage}"`;
        },
      },
    ],
    async verify({ svc, facts, said }) {
      const passage = said.match(/"([^"]+)"/)?.[1];
      assert.ok(passage, `the model showed no passage: ${said}`);
      const list = await svc.call('list_worldbook_entries', { worldbookId: facts.worldbookId });
      assert.equal(list.entries.length, 5);
      const fired = await svc.call('test_worldbook_triggers', { worldbookId: facts.worldbookId, text: passage });
      assert.equal(new Set(fired.fired.map((f) => f.entryId)).size, 5, 'the passage does not fire all five');
    },
  },
  {
    id: 'big-find',
    title: 'Find and rewrite one entry of a 1,000-entry worldbook by a query that matches many',
    async setup({ svc }) {
      const { worldbookId } = await svc.call('create_worldbook', { name: 'The Harbour' });
      for (let start = 0; start < 1000; start += 500) {
        const entries = [];
        for (let i = start; i < start + 500; i++) entries.push(i === 637 ? PLANTED : lantern(i));
        await svc.call('write_worldbook_document', { worldbookId, entries });
      }
      return { worldbookId };
    },
    prompt: ({ worldbookId }) => `In my worldbook ${worldbookId}, find the entry about the blind cartographer of the old harbour and rewrite it: she is Ilse, maps the reefs by ear and sells her charts at dawn.`,
    steps: [
      // The query matches many entries: the model takes the best match the page shows of what
      // the author described (its name or brief content names the cartographer), paging on
      // while none does; then reads it in full where the tool reads entries by id.
      {
        repeat: [{
          call: 'list_worldbook_entries',
          args: (s) => ({ worldbookId: s.fact(/worldbook (wb_[0-9a-f]+)/), query: 'cartographer of the old harbour', ...(s.r.found?.data.nextCursor ? { cursor: s.r.found.data.nextCursor } : {}) }),
          as: 'found',
        }],
        while: (s) => {
          if (s.r.found.failed) fail(s, 'the search failed');
          s.best = (s.r.found.data.entries ?? []).find((e) => /cartographer/i.test(`${e.name} ${e.content ?? ''}`));
          return !s.best && Boolean(s.r.found.data.nextCursor);
        },
      },
      {
        if: (s) => {
          if (!s.best) fail(s, 'nothing found');
          return offers(s, 'list_worldbook_entries', 'entryIds');
        },
        then: [{ call: 'list_worldbook_entries', args: (s) => ({ worldbookId: s.r.found.args.worldbookId, entryIds: [s.best.entryId] }), as: 'entry' }],
      },
      {
        call: 'write_worldbook_document',
        args: (s) => {
          const read = s.r.entry?.data.entries?.[0] ?? s.best;
          return { worldbookId: s.r.found.args.worldbookId,
            entries: [{ op: 'update', entryId: s.best.entryId, content: 'Ilse, the blind cartographer of the old harbour, maps the reefs by ear and sells her charts at dawn.',
              ...(JSON.stringify(s.schemas.write_worldbook_document?.properties?.entries ?? {}).includes('"ifVersion"') && read.version ? { ifVersion: read.version } : {}) }] };
        },
        as: 'write',
      },
      { if: (s) => s.r.write.failed, then: [{ say: (s) => fail(s, 'the rewrite failed') }] },
      { say: (s) => `Rewrote ${s.best.name}.` },
    ],
    async verify({ svc, facts }) {
      const found = await svc.call('list_worldbook_entries', { worldbookId: facts.worldbookId, query: 'Ilse', detail: 'full' });
      const ilse = found.entries.find((e) => e.name === 'Ilse');
      assert.ok(ilse, 'no entry Ilse');
      assert.match(ilse.content, /maps the reefs by ear/, 'the planted entry was not the one rewritten');
    },
  },
  {
    id: 'undo',
    title: 'Undo the last change and show the author what came back',
    needs: { 'Claude Code': ['restoreAsksNothing'] },
    async setup({ svc }) {
      const { roleId } = await svc.call('create_card', { roleName: 'Captain Mira Vale' });
      await svc.call('set_opening_lines', { roleId, roleWelcome: W1 });
      await svc.call('set_opening_lines', { roleId, roleWelcome: W2 });
      return { roleId };
    },
    prompt: ({ roleId }) => `Undo the last change to my card ${roleId} and show me what came back.`,
    steps: [
      { call: 'list_revisions', args: (s) => ({ roleId: s.fact(/card (r_[0-9a-f]+)/) }), as: 'revs' },
      { call: 'diff_revision', args: (s) => ({ revisionId: s.r.revs.data.revisions[0].revisionId }), as: 'diff' },
      { call: 'restore_revision', args: (s) => ({ revisionId: s.r.revs.data.revisions[0].revisionId }), as: 'restore' },
      confirmed('restore_revision', 'restore'),
      { if: (s) => s.r.restore.failed, then: [{ say: (s) => fail(s, 'the restore failed') }] },
      { call: 'get_card', args: (s) => ({ roleId: s.r.revs.data.revisions[0].objectId }), as: 'card' },
      { say: (s) => `Undone. The greeting is back to: ${s.r.card.data.roleWelcome} (the undo itself is revision ${s.r.restore.data.revisionId ?? s.r.restore.data.revision?.revisionId}).` },
    ],
    async verify({ svc, facts, said }) {
      const card = await svc.call('get_card', { roleId: facts.roleId });
      assert.equal(card.roleWelcome, W1);
      assert.ok(said.includes(W1), `the author was not shown what came back: ${said}`);
    },
  },
  {
    id: 'export-large',
    title: 'Export a card too large for a result and put the file in the author\'s hands',
    needs: { http: ['downloadUrl'] },
    async setup({ svc }) {
      const { roleId } = await svc.call('create_card', { roleName: 'The Harbour Keeper' });
      await svc.call('write_card_document', { roleId, sections: { description: 'The keeper of the old harbour\'s lanterns.' } });
      await svc.call('set_opening_lines', { roleId, roleWelcome: '"Another ship lost," the keeper sighs.' });
      const { worldbookId } = await svc.call('create_worldbook', { name: 'Lanterns' });
      const entries = [];
      for (let i = 0; i < 300; i++) entries.push(loreEntry(i));
      await svc.call('write_worldbook_document', { worldbookId, entries, binding: { roleId } });
      return { roleId };
    },
    prompt: ({ roleId, home }) => `Export my card ${roleId} as a card file and get it to me (my folder is ${home}).`,
    steps: [
      { call: 'export_tavern_card', args: (s) => ({ roleId: s.fact(/card (r_[0-9a-f]+)/) }), as: 'exp' },
      {
        if: (s) => !s.r.exp.failed && !s.r.exp.data.link?.downloadUrl && !s.r.exp.data.written
          && (s.r.exp.data.link || /too large for this result/.test(s.r.exp.shown)) && offers(s, 'export_tavern_card', 'path'),
        then: [{ call: 'export_tavern_card', args: (s) => ({ roleId: s.r.exp.args.roleId, path: join(s.fact(/my folder is (\S+)\)/), 'card.json') }), as: 'exp' }],
      },
      {
        say: (s) => {
          const d = s.r.exp.data;
          // The address in the data, or in the text where the host passes only that (Gemini CLI
          // beside a resource_link).
          const url = d.link?.downloadUrl ?? s.r.exp.shown.match(/https?:\/\/[^\s"\\)]+\/download\/[^\s"\\)]+/)?.[0];
          if (url) return `Download your card here: ${url}`;
          const written = d.written?.path ?? s.r.exp.shown.match(/Written to (\/\S+) \(/)?.[1];
          if (written) return `Your card is saved at ${written}`;
          return fail(s, 'the export reached no file');
        },
      },
    ],
    async verify({ said, fetchAsAuthor }) {
      const url = said.match(/(https?:\/\/\S+)/)?.[1];
      const path = said.match(/saved at (\/\S+)/)?.[1];
      let text;
      if (url) text = await fetchAsAuthor(url);
      else if (path && existsSync(path)) text = readFileSync(path, 'utf8');
      assert.ok(text, `the author got no file: ${said}`);
      const card = JSON.parse(text);
      assert.equal(card.spec, 'chara_card_v3');
      assert.equal(card.data.character_book.entries.length, 300);
    },
  },
  {
    id: 'import-lorebook',
    title: 'Import a lorebook (SillyTavern\'s Eldoria) into an existing worldbook',
    async setup({ svc, home }) {
      copyFileSync(join(REAL, 'Eldoria.json'), join(home, 'Eldoria.json'));
      const { worldbookId } = await svc.call('create_worldbook', { name: 'Seraphina\'s World' });
      await svc.call('write_worldbook_document', { worldbookId, entries: [
        { op: 'create', name: 'The glade', content: 'Seraphina\'s glade is a sanctuary.', keywords: ['glade'] },
        { op: 'create', name: 'Shadowfangs', content: 'Beasts of the dark forest.', keywords: ['Shadowfang'] },
      ] });
      return { worldbookId, incoming: Object.keys(JSON.parse(readFileSync(join(REAL, 'Eldoria.json'), 'utf8')).entries).length };
    },
    prompt: ({ worldbookId, home }) => `Import the lorebook ${join(home, 'Eldoria.json')} into my worldbook ${worldbookId}.`,
    steps: [
      ...importFile('import_tavern_worldbook', (s) => s.fact(/lorebook (\S+\.json)/), (s) => ({ worldbookId: s.fact(/worldbook (wb_[0-9a-f]+)/) }), 'imp'),
      { if: (s) => s.r.imp.failed, then: [{ say: (s) => fail(s, 'the import failed') }] },
      { say: (s) => `Imported ${s.r.imp.data.entryCount} entries.` },
    ],
    async verify({ svc, facts, said }) {
      const list = await svc.call('list_worldbook_entries', { worldbookId: facts.worldbookId, limit: 100 });
      assert.equal(list.total ?? list.entries.length, 2 + facts.incoming);
      assert.match(said, new RegExp(`Imported ${facts.incoming} entries`), 'the model did not learn how many came in');
    },
  },
  {
    id: 'trial',
    title: 'Try an idea as a trial card, then delete it',
    needs: { 'Claude Code': ['confirmToken'] },
    async setup() {
      return {};
    },
    prompt: () => 'Try an idea as a trial card under the key tess-idea: Tess, a smuggler who owes the Syndicate. Show me how it looks, then delete it: yes, delete it, I am done with it.',
    steps: [
      {
        call: 'upsert_trial_card',
        args: (s) => ({ clientKey: s.fact(/under the key ([\w.-]+)/), card: { roleName: 'Tess', roleWelcome: '"Keep your voice down. The Syndicate has ears on this dock."',
          sections: { description: 'Tess is a smuggler who owes the Syndicate more than her ship is worth.' } } }),
        as: 'trial',
      },
      { call: 'get_trial_card', args: (s) => ({ clientKey: s.r.trial.args.clientKey }), as: 'look' },
      { call: 'delete_trial_card', args: (s) => ({ clientKey: s.r.trial.args.clientKey }), as: 'del' },
      confirmed('delete_trial_card', 'del'),
      { if: (s) => s.r.del.failed || s.r.del.data.removed === false, then: [{ say: (s) => fail(s, 'the delete failed') }] },
      { say: (s) => `The trial card ${s.r.trial.args.clientKey} was made and is deleted now.` },
    ],
    async verify({ svc }) {
      const list = await svc.call('list_trial_cards', {});
      assert.ok(Array.isArray(list.list), `list_trial_cards has no list: ${JSON.stringify(list)}`);
      assert.ok(!list.list.some((t) => t.clientKey === 'tess-idea'), 'the trial card is still there');
      const revs = await svc.call('list_revisions', { clientKey: 'tess-idea' });
      assert.ok(revs.revisions.some((r) => r.tool === 'delete_trial_card'), 'no revision of the delete: it never ran');
    },
  },
  {
    id: 'publish',
    title: 'Publish a card the author asked to publish',
    needs: { 'Claude Code': ['confirmToken'] },
    async setup({ svc }) {
      const { roleId } = await svc.call('create_card', { roleName: 'Captain Mira Vale' });
      await svc.call('write_card_document', { roleId, sections: { description: 'Mira Vale captains the Kestrel, a battered freighter.' } });
      await svc.call('set_opening_lines', { roleId, roleWelcome: W1 });
      return { roleId };
    },
    prompt: ({ roleId }) => `Publish my card ${roleId}. Yes, I want it submitted for review.`,
    steps: [
      { call: 'validate_card', args: (s) => ({ roleId: s.fact(/card (r_[0-9a-f]+)/) }), as: 'val' },
      { if: (s) => !s.r.val.data.ready, then: [{ say: (s) => fail(s, 'the card is not ready') }] },
      { call: 'publish_card', args: (s) => ({ roleId: s.r.val.data.roleId }), as: 'pub' },
      confirmed('publish_card', 'pub'),
      { if: (s) => s.r.pub.failed || s.r.pub.data.reviewStatus !== 'pending', then: [{ say: (s) => fail(s, 'the card was not submitted') }] },
      { say: () => 'Submitted: your card is waiting for review.' },
    ],
    async verify({ svc, facts }) {
      assert.equal((await svc.call('get_card', { roleId: facts.roleId })).reviewStatus, 'pending');
    },
  },
  {
    id: 'refused',
    title: 'Recover from a write the service refused (an entry already deleted)',
    async setup({ svc }) {
      const { worldbookId } = await svc.call('create_worldbook', { name: 'The Kestrel' });
      const w = await svc.call('write_worldbook_document', { worldbookId, entries: ['Galley', 'Cargo hold', 'Bridge'].map((name) => ({ op: 'create', name, content: `The Kestrel's ${name.toLowerCase()}.`, keywords: [name] })) });
      const gone = (w.entries ?? w.results ?? []).find((e) => e.name === 'Cargo hold')?.entryId ?? (await svc.call('list_worldbook_entries', { worldbookId, query: 'Cargo hold' })).entries[0].entryId;
      await svc.call('write_worldbook_document', { worldbookId, entries: [{ op: 'delete', entryId: gone }] });
      return { worldbookId, gone };
    },
    prompt: ({ worldbookId, gone }) => `In my worldbook ${worldbookId}, delete the entry ${gone} and add an entry about the Kestrel's engine, which coughs blue smoke.`,
    steps: [
      {
        call: 'write_worldbook_document',
        args: (s) => ({ worldbookId: s.fact(/worldbook (wb_[0-9a-f]+)/), entries: [
          { op: 'delete', entryId: s.fact(/the entry (\S+) and/) },
          { op: 'create', name: 'Engine', content: 'The Kestrel\'s engine coughs blue smoke when pushed.', keywords: ['engine'] },
        ] }),
        as: 'first',
      },
      {
        if: (s) => s.r.first.failed,
        then: [{
          // The refusal names the delete's entry: it is gone already, so only the new entry is sent.
          call: 'write_worldbook_document',
          args: (s) => ({ worldbookId: s.r.first.args.worldbookId, entries: s.r.first.args.entries.filter((e) => !(e.entryId && s.r.first.shown.includes(e.entryId))) }),
          as: 'second',
        }],
        else: [{ say: (s) => fail(s, 'the service took a delete of an entry that is gone') }],
      },
      { if: (s) => s.r.second.failed, then: [{ say: (s) => fail(s, 'the retry failed') }] },
      { say: (s) => `That entry was already gone (${s.r.first.data.error}); I added the engine entry.` },
    ],
    async verify({ svc, facts, said }) {
      const list = await svc.call('list_worldbook_entries', { worldbookId: facts.worldbookId });
      assert.deepEqual(list.entries.map((e) => e.name).sort(), ['Bridge', 'Engine', 'Galley']);
      assert.match(said, /not_found/);
    },
  },
  {
    id: 'revisions',
    title: 'Page through every revision of a card',
    async setup({ svc }) {
      const { roleId } = await svc.call('create_card', { roleName: 'Captain Mira Vale' });
      for (let i = 0; i < 25; i++) await svc.call('set_opening_lines', { roleId, roleWelcome: `"Draft ${i}," Mira says.` });
      return { roleId };
    },
    prompt: ({ roleId }) => `How many revisions of my card ${roleId} are kept? Go through every one.`,
    steps: [
      {
        repeat: [{
          call: 'list_revisions',
          args: (s) => ({ roleId: s.fact(/card (r_[0-9a-f]+)/), ...(s.r.page?.data.nextCursor ? { cursor: s.r.page.data.nextCursor } : {}) }),
          as: 'page',
        }],
        while: (s) => {
          if (s.r.page.failed) fail(s, 'list_revisions failed');
          s.seen = [...(s.seen ?? []), ...s.r.page.data.revisions.map((r) => r.revisionId)];
          return Boolean(s.r.page.data.nextCursor);
        },
      },
      { say: (s) => `${new Set(s.seen).size} revisions are kept, in ${s.calls.length} pages.` },
    ],
    async verify({ svc, facts, said }) {
      const all = new Set();
      let cursor;
      do {
        const page = await svc.call('list_revisions', { roleId: facts.roleId, ...(cursor ? { cursor } : {}) });
        page.revisions.forEach((r) => all.add(r.revisionId));
        cursor = page.nextCursor;
      } while (cursor);
      assert.ok(all.size >= 25, `only ${all.size} revisions`);
      assert.match(said, new RegExp(`^${all.size} revisions`));
      assert.match(said, /in [2-9]\d* pages/, 'the model did not page');
    },
  },
  {
    id: 'stale',
    title: 'Two assistants edit one card: the second is told it changed (stale write)',
    needs: { all: ['ifVersion'] },
    async setup({ svc }) {
      const { roleId } = await svc.call('create_card', { roleName: 'Captain Mira Vale' });
      await svc.call('write_card_document', { roleId, sections: { description: 'Mira Vale captains the Kestrel.' } });
      await svc.call('set_opening_lines', { roleId, roleWelcome: W1 });
      return { roleId };
    },
    prompt: ({ roleId }) => `Rewrite the greeting of my card ${roleId} so Mira greets the new pilot by name.`,
    steps: [
      { call: 'get_card', args: (s) => ({ roleId: s.fact(/card (r_[0-9a-f]+)/) }), as: 'card' },
      // The other assistant, in another window, writes the description meanwhile.
      { meanwhile: (s) => s.other(s.r.card.data.roleId) },
      {
        repeat: [{
          call: 'set_opening_lines',
          args: (s) => ({ roleId: s.r.card.data.roleId, roleWelcome: '"You must be Ash," Mira says. "Welcome to the Kestrel."',
            alternates: s.r.card.data.welcomeAlternates ?? [], prologue: s.r.card.data.prologue ?? [], ...guard(s, 'set_opening_lines', s.r.card.data) }),
          as: 'write',
        }, {
          if: (s) => s.r.write.failed && s.r.write.data.error === 'stale_write' && !s.told,
          then: [{ call: 'get_card', args: (s) => ({ roleId: s.r.card.data.roleId }), as: 'card' }],
        }],
        while: (s) => {
          if (!s.r.write.failed) return false;
          if (s.r.write.data.error !== 'stale_write' || s.told) fail(s, 'the write failed');
          s.told = true;
          return true;
        },
      },
      { if: (s) => !s.told, then: [{ say: (s) => fail(s, 'the write went through without a word that the card had changed') }] },
      { say: () => 'Someone changed the card while I worked (stale_write); I read it again and set the greeting on top of their change.' },
    ],
    async verify({ svc, facts }) {
      const card = await svc.call('get_card', { roleId: facts.roleId });
      assert.match(card.roleWelcome, /You must be Ash/);
      assert.equal(card.sections.description, 'Mira Vale captains the Kestrel, and flies her alone since the war.', 'the other assistant\'s write was lost');
    },
    /** The other assistant's write. */
    other: (svc) => async (roleId) => {
      await svc.call('write_card_document', { roleId, sections: { description: 'Mira Vale captains the Kestrel, and flies her alone since the war.' } });
    },
  },
];

/** The names of the server's tools a task's steps call (the ones its model loads). */
export function toolsOf(steps) {
  const names = new Set();
  const walk = (list) => {
    for (const st of list ?? []) {
      if (st.call) names.add(st.call);
      walk(st.then);
      walk(st.else);
      walk(st.repeat);
    }
  };
  walk(steps);
  return [...names];
}
