// The README's generated sections: a test computes a section's text, and the README must hold
// it between its markers (UPDATE_README=1 writes it there instead).
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The fenced block of README.md between <!-- name:begin --> and <!-- name:end -->: lines a test runs as written. */
export function readmeBlock(name) {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const begin = readme.indexOf(`<!-- ${name}:begin -->`);
  const end = readme.indexOf(`<!-- ${name}:end -->`);
  assert.ok(begin >= 0 && end > begin, `README.md has no ${name} block`);
  const block = readme.slice(begin, end);
  return block.slice(block.indexOf('\n', block.indexOf('```')) + 1, block.lastIndexOf('```'));
}

/**
 * Checks that a page of the docs (file, from the repository's root: README.md by default, or a
 * page of docs/) holds text (which starts with begin and ends with end) between those markers,
 * or writes it there under UPDATE_README=1. normalize, when given, is applied to both sides
 * before comparing; agree, when given, compares instead: it returns '' when the page's section
 * agrees with text (figures that differ from run to run, within what a run varies), else why
 * not. rerun names the command that rewrites the section.
 */
export function readmeSection(begin, end, text, { normalize = (s) => s, agree, rerun, file = 'README.md' }) {
  const path = join(ROOT, file);
  const readme = readFileSync(path, 'utf8');
  const start = readme.indexOf(begin);
  const stop = readme.indexOf(end);
  assert.ok(start >= 0 && stop > start, `${file} has no ${begin} ... ${end} section`);
  if (process.env.UPDATE_README) {
    writeFileSync(path, readme.slice(0, start) + text + readme.slice(stop + end.length));
    return;
  }
  const section = readme.slice(start, stop + end.length);
  if (agree) {
    const why = agree(section, text);
    assert.equal(why, '', `the section ${begin} of ${file} is stale (${why}): rerun with ${rerun}`);
    return;
  }
  assert.equal(normalize(section), normalize(text), `the section ${begin} of ${file} is stale: rerun with ${rerun}`);
}
