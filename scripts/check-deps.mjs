// `npm run check:deps`: the import-structure check (import cycles and folder layering) of the product
// code, by dependency-cruiser with the rules in .dependency-cruiser.cjs at the repository root.
//
// This only runs dependency-cruiser through its API and guards against a vacuous pass: with
// TypeScript 7 (no JavaScript compiler API) dependency-cruiser reads .ts files only through
// @swc/core, and when swc cannot be loaded it silently cruises nothing and reports no violations.
// So: fail if swc is not available, print how much was read, and fail if that is implausibly little.
// The violations are printed grouped by rule, each rule's reason once (dependency-cruiser's `format`
// re-summarises a result without its rule set and so reports cycles edge by edge, without the path).
// Exit status: 0 when there is no violation, 1 on violations, 2 when the check could not run properly.
import { cruise, getAvailableTranspilers } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';

// Far fewer TypeScript files of ours than the product has (over a hundred) means the cruise missed them.
const MIN_OWN_MODULES = 50;

function broken(message) {
  console.error(`check:deps: ${message}`);
  process.exit(2);
}

const swc = getAvailableTranspilers().find((t) => t.name === 'swc');
if (!swc?.available) {
  broken(`@swc/core (${swc?.version ?? '?'}) cannot be loaded; dependency-cruiser would read no TypeScript. Run npm ci.`);
}

const options = await extractDepcruiseOptions('./.dependency-cruiser.cjs');
const { output: result } = await cruise(['.'], options);

const own = result.modules.filter((m) => !m.coreModule && !m.couldNotResolve && !m.source.startsWith('node_modules/'));
const ownTs = own.filter((m) => /\.(d\.)?ts$/.test(m.source));
const ownImports = own.reduce((n, m) => n + m.dependencies.length, 0);
const perFolder = {};
for (const m of ownTs) {
  const folder = m.source.split('/')[0];
  perFolder[folder] = (perFolder[folder] ?? 0) + 1;
}
console.log(
  `check:deps: read ${ownTs.length} TypeScript files of ours (${Object.entries(perFolder)
    .map(([f, n]) => `${f}/ ${n}`)
    .join(', ')}) with ${ownImports} imports, parser ${result.summary.optionsUsed.parser ?? 'default'} ` +
    `(${swc.currentVersion}); ${result.summary.totalCruised} modules and ` +
    `${result.summary.totalDependenciesCruised} dependencies in all.`,
);
if (ownTs.length < MIN_OWN_MODULES || ownImports === 0) {
  broken(`only ${ownTs.length} TypeScript files and ${ownImports} imports read: the cruise missed the sources.`);
}

const violations = result.summary.violations;
if (violations.length === 0) {
  console.log('check:deps: no violations.');
  process.exit(0);
}
const rules = new Map(result.summary.ruleSetUsed.forbidden.map((r) => [r.name, r]));
const byRule = new Map();
for (const v of violations) byRule.set(v.rule.name, [...(byRule.get(v.rule.name) ?? []), v]);
for (const [name, list] of byRule) {
  console.log(`\n${list[0].rule.severity} ${name} (${list.length}): ${rules.get(name)?.comment ?? ''}`);
  for (const v of list) {
    const path = v.cycle ? [v.from, ...v.cycle.map((c) => c.name)] : [v.from, v.to];
    console.log(`  ${path.join(' → ')}`);
  }
}
const errors = result.summary.error;
console.log(
  `\ncheck:deps: ${violations.length} violations (${errors} errors, ${result.summary.warn} warnings) of ` +
    `${byRule.size} rules: ${[...byRule].map(([n, l]) => `${n} ${l.length}`).join(', ')}.`,
);
process.exit(errors > 0 ? 1 : 0);
