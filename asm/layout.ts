// The shared memory's top-level layout, defined once. Every thread instantiates the kernels over one shared
// WebAssembly.Memory; the host-owned region [0, HOST_REGION_BYTES) holds every table, and the module's own
// static data is emitted above it (--memoryBase HOST_REGION_BYTES), so a new instantiation, which copies the
// data segments again, never touches a table. scripts/build-asm.js reads these two numbers from here.

/** Bytes below --memoryBase that belong to the host's tables. */
export const HOST_REGION_BYTES: u32 = 1 << 30;
/** Pages of the shared memory (initial == maximum): the host region plus 1 MiB for static data. */
export const MEMORY_PAGES: u32 = (HOST_REGION_BYTES >>> 16) + 16;

// The directory at offset 0: written once by the thread that creates the region, before the memory is shared;
// every other thread finds its tables from here.
export const DIR_MAGIC: u32 = 0;            // u32 DIR_MAGIC_VALUE once initialised
export const DIR_VERSION: u32 = 4;          // u32 LAYOUT_VERSION
export const DIR_END: u32 = 8;              // u32 first byte past the last table
export const DIR_SCRATCH_NEXT: u32 = 12;    // u32 next scratch slot to claim (atomic)
export const DIR_TABLES: u32 = 64;          // u32 base offset of table i at DIR_TABLES + 4 * i (0 = absent)
export const DIR_TABLE_SLOTS: u32 = 32;
export const DIR_BYTES: u32 = 4096;

export const DIR_MAGIC_VALUE: u32 = 0x31524145; // "EAR1" little-endian
export const LAYOUT_VERSION: u32 = 3; // 3: pod rows sized at start, the prefix index in pod groups (2: leases)
/**
 * Most pod rows a region may have (config maxPods): the pod, load and prefix-index tables are laid out for the
 * rows asked for at start, up to this (the prefix index walks at most 64 groups of 256 pods, asm/prefix-index.ts).
 */
export const POD_ROWS_MAX: u32 = 16384;
/** Every table base is aligned to a cache line. */
export const TABLE_ALIGN: u32 = 64;

// Table ids (slots in the directory).
export const TABLE_PREFIX_INDEX: u32 = 0;
export const TABLE_SESSIONS: u32 = 1;
export const TABLE_HEAP: u32 = 2;
export const TABLE_RECORD_RING: u32 = 3;
export const TABLE_PODS: u32 = 4;
export const TABLE_LOAD: u32 = 5;
export const TABLE_SCRATCH: u32 = 6;
