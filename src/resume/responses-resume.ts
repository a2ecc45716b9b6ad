// Resuming OpenAI Responses streams (docs/resume.md).
import type { ResumeDialect } from './stream-resume.js';

const TERMINAL = new Set(['response.completed', 'response.failed', 'response.incomplete', 'error']);

export const RESPONSES_RESUME: ResumeDialect = {
  terminal: (e) => e.event !== null && TERMINAL.has(e.event),
  plan: () => ({ kind: 'refuse', reason: 'unsupported', detail: 'a Responses stream is not resumed' })
};
