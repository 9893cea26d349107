// Package taverntest holds test fixtures for the tavern package and the code that uses it: character
// cards and lorebooks as JSON-shaped values (a V1 card, a V2 card as SillyTavern writes it, a V3 card
// with emoji and CJK text, a card with sloppy types, a lorebook_v3 file, a SillyTavern World Info
// file), builders for the files that carry them (PNG images with text chunks, CHARX zip archives),
// and small assertion helpers.
//
// It is imported by tests only. It imports nothing from this module, so that the tavern package's
// own (in-package) tests can use it too.
package taverntest
