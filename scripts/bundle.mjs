// `node scripts/bundle.mjs` (part of `npm run build`, after tsc): bundles the `minicri` command (dist/server/cli.js)
// and everything it imports into dist/bundle/minicri.js, which dist/server/main.js runs. A start then reads and
// links a few files instead of nearly a thousand; most of a restarted daemon's time to its first answer was that.
// What the command imports with `import()` (the daemon behind its socket, doctor) goes into chunks of its own
// beside it, read only when needed. The unpack worker is bundled the same way (dist/bundle/unpack-worker.js), as
// every pull that starts one waits for it to load. The tsc output stays as it is (tests load those files).
//
// Modules that find files next to themselves (the proto files, the C helpers, the unpack worker, package.json)
// still find them: each one's `import.meta.url`, `__dirname` and `__filename` are rewritten to its own place,
// relative to the bundle, so dist/ and node_modules/ may move together as before.
// Native addons stay outside: they are loaded from node_modules as before.
import { readFile } from 'node:fs/promises';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const outdir = resolve(root, 'dist/bundle');
const NATIVE = ['better-sqlite3', '@napi-rs/xattr'];
/** Worker scripts bundled as entries of their own: who starts one finds it beside the bundle, not beside its source. */
const WORKERS = { 'unpack-worker': 'dist/oci/image/unpack-worker.js' };
/** The workers some bundled module was seen to start: one never seen would run unbundled, slower and unnoticed. */
const startsWorker = new Set();

/**
 * The URL of `file` computed at run time from the bundle's own, as a JavaScript expression. Through a name the
 * banner defines: `import.meta` itself would make esbuild take a CommonJS module for an ES module.
 */
function urlOf(file) {
  return `new URL(${JSON.stringify(relative(outdir, file))}, __minicriBundle).href`;
}

const ownPlaces = {
  name: 'own-places',
  setup(b) {
    b.onLoad({ filter: /\.[cm]?js$/ }, async ({ path }) => {
      const original = await readFile(path, 'utf8');
      let text = original;
      for (const name of Object.keys(WORKERS)) {
        const start = `new URL('./${name}.js', import.meta.url)`;
        if (text.includes(start)) startsWorker.add(name);
        text = text.replaceAll(start, `new URL('./${name}.js', __minicriBundle)`);
      }
      const uses = { meta: text.includes('import.meta.url'), dir: /\b__(dirname|filename)\b/.test(text) };
      if (!uses.meta && !uses.dir) return text === original ? undefined : { contents: text, loader: 'js', resolveDir: dirname(path) };
      if (uses.meta) text = text.replaceAll('import.meta.url', `(${urlOf(path)})`);
      // Only CommonJS modules use these; esbuild wraps each in a function, so the declarations stay its own.
      if (uses.dir) {
        text = `var __filename = __minicriPath(${urlOf(path)}), __dirname = __minicriDir(__filename);\n${text}`;
      }
      return { contents: text, loader: 'js', resolveDir: dirname(path) };
    });
  },
};

await build({
  entryPoints: {
    minicri: resolve(root, 'dist/server/cli.js'),
    ...Object.fromEntries(Object.entries(WORKERS).map(([name, file]) => [name, resolve(root, file)])),
  },
  outdir,
  entryNames: '[name]',
  chunkNames: '[name]-[hash]',
  splitting: true,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node26',
  external: NATIVE,
  plugins: [ownPlaces],
  // CommonJS modules inside ES modules need `require` (for Node's own modules and the native addons); every
  // output file gets these lines.
  banner: {
    js: [
      "import { createRequire as __minicriRequire } from 'node:module';",
      "import { fileURLToPath as __minicriPath } from 'node:url';",
      "import { dirname as __minicriDir } from 'node:path';",
      'const __minicriBundle = import.meta.url;',
      'const require = __minicriRequire(__minicriBundle);',
    ].join('\n'),
  },
  logLevel: 'warning',
});

const unseen = Object.keys(WORKERS).filter((name) => !startsWorker.has(name));
if (unseen.length > 0) {
  throw new Error(`no bundled module starts ${unseen.join(', ')} as new URL('./<name>.js', import.meta.url): update scripts/bundle.mjs`);
}
