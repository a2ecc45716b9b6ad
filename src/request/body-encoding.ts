// Request bodies a client compressed (`content-encoding: gzip`, `deflate`, `br` or `zstd`: Codex can send zstd):
// decoded before anything reads them, bounded by maxBodyBytes of *decoded* bytes, so a small bomb gets 413 and
// never the memory it asks for. Engines get the decoded body (vLLM, behind uvicorn, does not decode request
// bodies), without the header. gzip, deflate and br decode on libuv's threads (zlib's async calls); zstd is
// pure JavaScript (fzstd) on this thread, since Node 20's zlib has no zstd (a 115 KB turn: about a millisecond).
import { promisify } from 'node:util';
import { brotliDecompress, gunzip, inflate, type ZlibOptions } from 'node:zlib';
import { Decompress as ZstdDecompress } from 'fzstd';
import { EarError } from '../errors/errors.js';
import { joinBody } from './body-buffer.js';

type Decoder = (body: Buffer, maxBytes: number) => Promise<Buffer>;

const zlibDecoder = (fn: (buf: Buffer, o: ZlibOptions) => Promise<Buffer>, name: string): Decoder => async (body, maxBytes) => {
  try {
    return await fn(body, { maxOutputLength: maxBytes });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') throw tooLarge(maxBytes);
    throw new EarError('EAR_ERR_BAD_REQUEST', `request body is not valid ${name} (content-encoding): ${(err as Error).message}`);
  }
};

/**
 * zstd, streamed, counting what comes out. fzstd sizes each frame's window from the frame's header (up to 2 GB),
 * so the headers are read first (zstdFrameSizes) and a frame that declares more than the bound is refused before
 * anything is allocated for it.
 */
const zstd: Decoder = async (body, maxBytes) => {
  const fail = (why: string): EarError => new EarError('EAR_ERR_BAD_REQUEST', `request body is not valid zstd (content-encoding): ${why}`);
  const frames = zstdFrames(body);
  if (typeof frames === 'string') throw fail(frames);
  for (const f of frames) {
    if (f.content !== null && f.content > maxBytes) throw tooLarge(maxBytes);
    if (f.window > ZSTD_MAX_WINDOW) throw new EarError('EAR_ERR_BODY_TOO_LARGE', `a zstd frame's window of ${f.window} bytes exceeds the ${ZSTD_MAX_WINDOW} EAR decodes with (content-encoding)`);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  const d = new ZstdDecompress((chunk) => {
    size += chunk.length;
    if (size > maxBytes) throw tooLarge(maxBytes);
    chunks.push(chunk);
  });
  try {
    d.push(body, true);
  } catch (err) {
    throw err instanceof EarError ? err : fail((err as Error).message);
  }
  return joinBody(chunks, size);
};

/** The largest window EAR decodes with: the 8 MiB RFC 8878 §3.1.1.1.2 asks every decoder to support. */
export const ZSTD_MAX_WINDOW = 8 << 20;

export interface ZstdFrame {
  /** The memory a decoder gives the frame: its window, or its content size when it is a single segment. */
  window: number;
  /** The content size it declares; null when it declares none. */
  content: number | null;
}

/**
 * The zstd frames of `data` (RFC 8878 §3.1), skippable frames skipped; a string says why `data` is not zstd.
 * Blocks are walked by their headers, not decoded.
 */
export function zstdFrames (data: Uint8Array): ZstdFrame[] | string {
  const out: ZstdFrame[] = [];
  let at = 0;
  const u32 = (i: number): number => (data[i] | (data[i + 1] << 8) | (data[i + 2] << 16)) + data[i + 3] * 0x1000000;
  while (at < data.length) {
    if (at + 4 > data.length) return 'truncated frame';
    const magic = u32(at);
    if (magic >= 0x184d2a50 && magic <= 0x184d2a5f) {
      if (at + 8 > data.length) return 'truncated skippable frame';
      at += 8 + u32(at + 4);
      continue;
    }
    if (magic !== 0xfd2fb528) return 'bad magic number';
    const fhd = data[at + 4];
    if (fhd === undefined || (fhd & 8) !== 0) return 'bad frame header';
    const single = (fhd >> 5) & 1;
    const fcsBytes = [single, 2, 4, 8][fhd >> 6];
    let p = at + 5;
    let window = 0;
    if (single === 0) {
      const wd = data[p++];
      if (wd === undefined) return 'truncated frame header';
      const base = 2 ** (10 + (wd >> 3));
      window = base + (base / 8) * (wd & 7);
    }
    p += [0, 1, 2, 4][fhd & 3];
    if (p + fcsBytes > data.length) return 'truncated frame header';
    let fcs = 0;
    for (let i = fcsBytes - 1; i >= 0; i--) fcs = fcs * 256 + data[p + i];
    if (fcsBytes === 2) fcs += 256;
    p += fcsBytes;
    out.push({ window: single === 1 ? fcs : window, content: fcsBytes > 0 ? fcs : null });
    for (;;) {
      if (p + 3 > data.length) return 'truncated block';
      const h = data[p] | (data[p + 1] << 8) | (data[p + 2] << 16);
      const type = (h >> 1) & 3;
      if (type === 3) return 'reserved block type';
      p += 3 + (type === 1 ? 1 : h >>> 3);
      if ((h & 1) === 1) break;
    }
    at = p + ((fhd >> 2) & 1) * 4;
  }
  return at === data.length ? out : 'truncated frame';
}

const DECODERS: Readonly<Record<string, Decoder>> = {
  gzip: zlibDecoder(promisify(gunzip), 'gzip'),
  'x-gzip': zlibDecoder(promisify(gunzip), 'gzip'),
  deflate: zlibDecoder(promisify(inflate), 'deflate'),
  br: zlibDecoder(promisify(brotliDecompress), 'brotli'),
  zstd
};

function tooLarge (maxBytes: number): EarError {
  return new EarError('EAR_ERR_BODY_TOO_LARGE', `request body exceeds ${maxBytes} bytes once decoded (content-encoding)`);
}

/** The names in a content-encoding header, in the order they were applied; throws 415 for one EAR cannot decode. */
export function contentCodings (header: string): string[] {
  const out: string[] = [];
  for (const part of header.split(',')) {
    const name = part.trim().toLowerCase();
    if (name === '' || name === 'identity') continue;
    if (DECODERS[name] === undefined) throw new EarError('EAR_ERR_UNSUPPORTED_ENCODING', `content-encoding "${name.slice(0, 64)}" is not supported (gzip, deflate, br, zstd)`);
    out.push(name);
  }
  return out;
}

/** The body as sent before `codings` (contentCodings' result) were applied, at most maxBytes of it. */
export async function decodeBody (body: Buffer, codings: readonly string[], maxBytes: number): Promise<Buffer> {
  let b = body;
  for (let i = codings.length - 1; i >= 0; i--) b = await DECODERS[codings[i]](b, maxBytes);
  return b;
}
