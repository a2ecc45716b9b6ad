// x-request-id: the client's if it is a sane token (so logs line up across hops), else a new UUID.
import { randomUUID } from 'node:crypto';

const SAFE = /^[A-Za-z0-9._:-]{1,128}$/;

export function requestId (fromClient: string): string {
  return SAFE.test(fromClient) ? fromClient : randomUUID();
}
