// The error registry is src/request/errors.ts. This name stays only for server.ts, admission-wait.ts and
// epp/picker.ts (being rewritten, issue 21): they import EarError from there next, and this file goes.
export { EarError as GatewayError } from '../request/errors.js';
