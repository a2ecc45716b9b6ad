// Writes a run's report to a directory: results.json, report.md and the PNG plots it links.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { renderMarkdown } from './markdown.js';
import { plotsOf, renderPng } from './plots.js';
import type { Results } from './results.js';

export { buildResults, gitCommit, machine, type Results, type PolicyResult, type Sweep, type SweepPoint, type Machine, type Commit } from './results.js';
export { renderMarkdown, policyTable, describeWorkload, COLUMNS } from './markdown.js';
export { plotsOf, renderPng, slug, type Plot } from './plots.js';
export { Progress, type ProgressOptions } from './progress.js';

/** Returns the files written, relative to `outDir`. */
export async function writeReport (outDir: string, results: Results, options: { plots?: boolean } = {}): Promise<string[]> {
  await mkdir(outDir, { recursive: true });
  const written = ['results.json'];
  await writeFile(join(outDir, 'results.json'), JSON.stringify(results, null, 2) + '\n');
  const pngs: string[] = [];
  if (options.plots ?? true) {
    for (const p of plotsOf(results)) {
      await writeFile(join(outDir, p.file), await renderPng(p.spec));
      pngs.push(p.file);
    }
  }
  await writeFile(join(outDir, 'report.md'), renderMarkdown(results, pngs));
  return [...written, 'report.md', ...pngs];
}
