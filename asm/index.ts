// Entry point of the kernels module: re-exports every kernel and layout constant.
// Compiled by scripts/build-asm.js with --runtime stub over an imported shared memory; the rules that follow
// from it: docs/architecture.md#assemblyscript-over-shared-memory.
export * from './layout';
export * from './xxhash64';
export * from './block-hash';
export * from './prefix-index';
export * from './session-table';
export * from './heap';
export * from './ring';
export * from './pod-table';
export * from './load-table';
export * from './ring-apply';
export * from './key-ring';
