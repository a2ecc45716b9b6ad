// Which APIs resume a cut stream, and how (stream-resume.ts): every API that streams generated output.
import type { Endpoint } from '../dialects/dialect.js';
import { MESSAGES_RESUME } from './anthropic-resume.js';
import { CHAT_RESUME, COMPLETIONS_RESUME } from './openai-resume.js';
import { RESPONSES_RESUME } from './responses-resume.js';
import type { ResumeDialect } from './stream-resume.js';

const RESUMES: Partial<Record<Endpoint, ResumeDialect>> = {
  chat: CHAT_RESUME,
  completions: COMPLETIONS_RESUME,
  messages: MESSAGES_RESUME,
  responses: RESPONSES_RESUME
};

/** The resume of `endpoint`'s API; null for one that does not stream output (count_tokens). */
export function resumeFor (endpoint: Endpoint): ResumeDialect | null {
  return RESUMES[endpoint] ?? null;
}
