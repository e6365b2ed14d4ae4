// Import-structure check for minicri's product code: `npm run check:deps`.
//
// What is checked: every .ts file of the product folders (core/, http2/, streaming/, pod/, store/,
// netns/, cni/, cdi/, mounter/, oci/, server/, and the generated gen/). test/, bench/ and scripts/ are exempt from
// every rule and are not cruised at all; neither are node_modules/, dist/ or files at the repository
// root. Folders that do not exist (yet) simply match nothing.
//
// How the sources are read: with @swc/core (options.parser "swc"). dependency-cruiser's own
// TypeScript path needs the `typescript` package's JavaScript compiler API, which TypeScript 7 (the
// native port this repo uses) does not ship. Without @swc/core installed, dependency-cruiser does not
// even pick up .ts files and passes having read nothing; with it installed but without parser "swc",
// its default (acorn) reading of TypeScript drops `export type { X } from './y.js'`. swc keeps
// `import type`, `export type … from` and inline `type` specifiers, so type-only imports are
// dependencies here like any other, and a cycle made of type-only imports is a cycle. (Not seen:
// `import('./y.js').X` type queries in type aliases and `as` casts; they are seen in annotations.)
// scripts/check-deps.mjs runs this config and fails if swc cannot be loaded or too little was read,
// so the check cannot pass vacuously.
//
// Paths in the rules are relative to the repository root.

/** Dependencies that are not ours: node builtins and npm packages (unresolvable ones have their own rule). */
const notOurs = { dependencyTypesNot: ['core'], pathNot: '^node_modules/', couldNotResolve: false };

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'Import cycles make module initialisation order fragile (an ES module can be read before it has ' +
        'run) and tie the modules on the cycle into one unit that cannot be layered or moved apart. ' +
        'Type-only imports count too: a type cycle is the same design knot, and `import type` turns ' +
        'into a value import with one edit. Cycles wholly inside the generated gen/ are left out (it ' +
        'has none today, and they would be the proto generator\'s to fix); gen/ imports nothing of ' +
        'ours, so no cycle can pass through it.',
      from: { pathNot: '^gen/' },
      to: { circular: true },
    },
    {
      name: 'core-imports-nothing-of-ours',
      severity: 'error',
      comment:
        'core/ is the foundation every other folder builds on. It may use node builtins and npm ' +
        'packages only: anything of ours (gen/ included) would put core/ above the thing it imports ' +
        'and invite cycles through the foundation.',
      from: { path: '^core/' },
      to: { ...notOurs, pathNot: [notOurs.pathNot, '^core/'] },
    },
    {
      name: 'nothing-outside-server-imports-server',
      severity: 'error',
      comment:
        'server/ is the top of the stack: it wires the gRPC services, config and daemon lifecycle out ' +
        'of the lower folders. A lower folder importing server/ turns the layering upside down (and ' +
        'drags the whole daemon into whatever imports it). Shared helpers belong in core/.',
      from: { pathNot: '^server/' },
      to: { path: '^server/' },
    },
    {
      name: 'pod-not-to-protocol-libs',
      severity: 'error',
      comment:
        'streaming/ and http2/ are protocol libraries the edge (server/) uses to talk to kubelet; ' +
        'pod/ is the pod/container model and must not depend on a wire protocol.',
      from: { path: '^pod/' },
      to: { path: '^(streaming|http2)/' },
    },
    {
      name: 'protocol-libs-only-core',
      severity: 'error',
      comment:
        'streaming/ and http2/ are protocol libraries that build only on core/; they must not know ' +
        'about pods, CNI, network namespaces, OCI or each other. The edge passes what they need in ' +
        '(a session\'s stdio is core/stdio.ts).',
      from: { path: '^(streaming|http2)/' },
      to: { ...notOurs, pathNot: [notOurs.pathNot, '^core/', '^$1/'] },
    },
    {
      name: 'store-only-core',
      severity: 'error',
      comment:
        'store/ is the state database every domain keeps its records in; it knows no record type and ' +
        'may import nothing of ours but core/.',
      from: { path: '^store/' },
      to: { ...notOurs, pathNot: [notOurs.pathNot, '^(core|store)/'] },
    },
    {
      name: 'lower-layers-not-to-pod',
      severity: 'error',
      comment:
        'oci/, cni/, netns/, mounter/ and store/ are the mechanisms pod/ drives; pod/ sits above them. ' +
        'An import back into pod/ is an upward dependency.',
      from: { path: '^(oci|cni|cdi|netns|mounter|store)/' },
      to: { path: '^pod/' },
    },
    {
      name: 'mounter-only-core',
      severity: 'error',
      comment:
        'mounter/ is the mount(2) helper used by oci/ and netns/; it is a leaf above core/ and may ' +
        'import nothing else of ours (besides node builtins and npm packages).',
      from: { path: '^mounter/' },
      to: { ...notOurs, pathNot: [notOurs.pathNot, '^(core|mounter)/'] },
    },
    {
      name: 'cdi-only-core',
      severity: 'error',
      comment:
        'cdi/ reads the node\'s CDI spec files and resolves device names to container edits; it builds on ' +
        'core/ only. The OCI spec builder applies the edits and pod/ asks for them, so both sit above it.',
      from: { path: '^cdi/' },
      to: { ...notOurs, pathNot: [notOurs.pathNot, '^(core|cdi)/'] },
    },
    {
      name: 'oci-not-to-cni',
      severity: 'error',
      comment:
        'oci/ (runtime and image) knows nothing of pod networking; networking is wired by pod/ and ' +
        'server/.',
      from: { path: '^oci/' },
      to: { path: '^cni/' },
    },
    {
      name: 'oci-not-to-netns',
      severity: 'error',
      comment:
        'oci/ knows nothing of network namespaces. The mount helper it needs lives in mounter/, not ' +
        'netns/; no exception is made for netns/.',
      from: { path: '^oci/' },
      to: { path: '^netns/' },
    },
    {
      name: 'cni-not-to-oci',
      severity: 'error',
      comment:
        'cni/ sets up pod networks from a network namespace path; it has no business with containers ' +
        'or images.',
      from: { path: '^cni/' },
      to: { path: '^oci/' },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment:
        'Every import must resolve to a file or an installed package; otherwise the other rules cannot ' +
        'see where it points. (gen/ imports resolve only after `npm run gen`.)',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    // Read TypeScript with swc: see the header.
    parser: 'swc',
    // Cruise product code only: not the exempt folders, build output or the JS files at the root
    // (this config). npm packages appear as the ends of dependencies but are not read.
    exclude: { path: ['^(dist|test|bench|scripts)/', '^[^/]+\\.[cm]?js$'] },
    doNotFollow: { path: '^node_modules/' },
    moduleSystems: ['es6', 'cjs'],
    // `import x from './y.js'` resolves to y.ts (dependency-cruiser retries .js as .ts/.d.ts when
    // no .js file exists); packages resolve through their "exports" as node does.
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      mainFields: ['module', 'main', 'types', 'typings'],
      extensions: ['.ts', '.d.ts', '.js', '.cjs', '.mjs', '.json'],
    },
    reporterOptions: {
      text: { highlightFocused: true },
    },
  },
};
