import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT_DIR } from '../src/config.ts';

/**
 * The node options of package.json's script `name` (`start`, `cli`) in the checkout at `root`
 * (default this one): the tokens starting with `-` between `node` and the script path, e.g.
 * `['--max-old-space-size=384', '--liftoff-only']`, so that tests and the bench start a
 * command as `npm start` / `npm run cli` does. An older checkout's script may have fewer.
 * @throws Error when the script does not exist.
 */
export function scriptNodeOptions(name: 'start' | 'cli', root = ROOT_DIR): string[] {
  const scripts = (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  const script = scripts[name];
  if (script === undefined) throw new Error(`package.json has no script ${name}`);
  const argv = script.split(/\s+/);
  const rest = argv.slice(argv.indexOf('node') + 1);
  const end = rest.findIndex((a) => !a.startsWith('-'));
  return end === -1 ? rest : rest.slice(0, end);
}
