// Imported first by card.js: zod without its JIT (which compiles parsers with new Function)
// before any schema of the SDK is built. The App class sets this too, but only when constructed,
// after the SDK's modules have built their schemas and zod has probed for eval, which the
// page's CSP (no 'unsafe-eval') reports as a violation.
import { config } from 'zod/v4/core';

config({ jitless: true });
