// Loads the kernels module (build/core.wasm) and instantiates it over a shared memory. The module is compiled
// once per thread and can be handed to other threads (workerData / postMessage) with the memory.
import { readFileSync } from 'node:fs';

const WASM_URL = new URL('../../../build/core.wasm', import.meta.url);
const LAYOUT_URL = new URL('../../../build/layout.wasm', import.meta.url);

let cachedModule: WebAssembly.Module | undefined;
let cachedLayout: WebAssembly.Exports | undefined;

export type CoreExports = WebAssembly.Exports;

/** The compiled kernels module, compiled lazily once per thread. */
export function coreModule (): WebAssembly.Module {
  cachedModule ??= new WebAssembly.Module(readFileSync(WASM_URL));
  return cachedModule;
}

/**
 * A constant of asm/layout.ts, read from its own small build (no shared memory needed): the memory's size, and
 * limits that configuration checks need before any region exists (POD_ROWS_MAX).
 */
export function layoutConstant (name: string): number {
  cachedLayout ??= new WebAssembly.Instance(new WebAssembly.Module(readFileSync(LAYOUT_URL)), { env: { abort () {} } }).exports;
  return constant(cachedLayout, name);
}

/** Pages of the shared memory, read from asm/layout.ts's own build (the kernels import a memory of exactly this size). */
export function memoryPages (): number {
  return layoutConstant('MEMORY_PAGES');
}

/** A fresh shared memory sized for the kernels (initial == maximum: views never go stale). Untouched pages cost no RSS. */
export function createSharedMemory (): WebAssembly.Memory {
  const pages = memoryPages();
  return new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
}

/** Instantiates the kernels over `memory`. Safe on any thread, any number of times: the kernels keep no statics. */
export function instantiateCore (memory: WebAssembly.Memory, module: WebAssembly.Module = coreModule()): CoreExports {
  const instance = new WebAssembly.Instance(module, {
    env: {
      memory,
      abort (msg: number, file: number, line: number, col: number) {
        throw new Error(`wasm abort at ${line}:${col}`);
      }
    }
  });
  return instance.exports;
}

/** Reads an exported `const` (a WebAssembly.Global) as a number. */
export function constant (exports: CoreExports, name: string): number {
  const g = exports[name];
  if (!(g instanceof WebAssembly.Global)) throw new Error(`kernels export no constant ${name}`);
  const v = g.value;
  return typeof v === 'bigint' ? Number(v) : v;
}

/** Reads an exported function, typed by the caller. */
export function kernel<F extends (...args: any[]) => any> (exports: CoreExports, name: string): F {
  const f = exports[name];
  if (typeof f !== 'function') throw new Error(`kernels export no function ${name}`);
  return f as F;
}
