// Loaded with `node --import ./test/helpers/forbid-modules.mjs`: registers a module resolve hook
// that makes resolving any package named in FORBID_MODULES (comma-separated; a name also
// forbids its subpaths) fail with "FORBIDDEN MODULE" and the importing file. Used to show that
// a command does not load a module at all (e.g. the operator commands never load Fastify).
import { register } from 'node:module';

register('./forbid-modules-hooks.mjs', import.meta.url);
