// Describes the machine a benchmark ran on, for the results table.
import os from 'node:os';
import { execSync } from 'node:child_process';

export function machine (): string {
  const cpus = os.cpus();
  return `${cpus[0]?.model ?? 'unknown CPU'} × ${cpus.length} cores, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ` +
    `Node ${process.version}, ${os.type()} ${os.release()}`;
}

export function gitCommit (): string {
  try {
    return execSync('git rev-parse --short HEAD', { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
  } catch {
    return 'unknown';
  }
}
