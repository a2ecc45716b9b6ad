#!/usr/bin/env node
// Compiles asm/ to build/core.wasm. The memory numbers come from asm/layout.ts itself: it is compiled
// first on its own (build/layout.wasm), instantiated, and read, so they are written in one place only.
import { mkdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import asc from 'assemblyscript/asc';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = join(root, 'build');
mkdirSync(out, { recursive: true });

async function compile (args) {
  const { error, stderr } = await asc.main(args, { stdout: process.stdout, stderr: process.stderr });
  if (error) {
    console.error(stderr.toString());
    throw error;
  }
}

await compile([join(root, 'asm/layout.ts'), '-o', join(out, 'layout.wasm'), '--runtime', 'stub', '-O3', '--noAssert']);
const layout = new WebAssembly.Instance(new WebAssembly.Module(readFileSync(join(out, 'layout.wasm'))), { env: { abort () {} } }).exports;
const hostBytes = layout.HOST_REGION_BYTES.value >>> 0;
const pages = layout.MEMORY_PAGES.value >>> 0;

await compile([
  join(root, 'asm/index.ts'), '-o', join(out, 'core.wasm'), '-t', join(out, 'core.wat'),
  '--runtime', 'stub', '--importMemory', '--sharedMemory', '--enable', 'threads',
  '--initialMemory', String(pages), '--maximumMemory', String(pages),
  '--memoryBase', String(hostBytes), '-O3', '--noAssert'
]);
console.log(`build/core.wasm: host region ${hostBytes} bytes, ${pages} pages`);
