// `node scripts/check-lines.mjs`: no line of product code (the TypeScript and C sources of the product
// folders) is wider than 140 columns, a script's #! line aside. Prints `file:line (columns)` for each one that
// is and exits 1; exits 0 when there is none, 2 when a folder cannot be read. Columns are characters, not bytes.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const MAX_COLUMNS = 140;
const PRODUCT_FOLDERS = ['cdi', 'cni', 'core', 'http2', 'mounter', 'netns', 'oci', 'pod', 'server', 'store', 'streaming'];
const SOURCE = /\.(ts|c)$/;

function sources(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sources(path);
    return e.isFile() && SOURCE.test(e.name) ? [path] : [];
  });
}

let files;
try {
  files = PRODUCT_FOLDERS.flatMap(sources).sort();
} catch (err) {
  console.error(`check:lines: ${err.message} (run it from the repository root)`);
  process.exit(2);
}

const long = [];
for (const file of files) {
  readFileSync(file, 'utf8').split('\n').forEach((line, i) => {
    const columns = [...line.replace(/\r$/, '')].length;
    // A script's first line (#!) cannot be wrapped: the kernel reads it whole, up to 255 bytes.
    if (columns > MAX_COLUMNS && !(i === 0 && line.startsWith('#!'))) long.push(`${file}:${i + 1} (${columns})`);
  });
}
if (long.length > 0) {
  console.error(`check:lines: ${long.length} lines over ${MAX_COLUMNS} columns; wrap them:`);
  for (const l of long) console.error(`  ${l}`);
  process.exit(1);
}
console.log(`check:lines: ${files.length} files, no line over ${MAX_COLUMNS} columns.`);
