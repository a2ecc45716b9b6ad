// Errors at the simulator's HTTP edge, shaped as vLLM answers them (vllm-wire.md §3.2):
// {"error":{"message","type","param","code"}} where code is the HTTP status as an int.

const typeByStatus: Record<number, string> = {
  400: 'BadRequestError',
  404: 'NotFoundError',
  413: 'BadRequestError',
  500: 'InternalServerError',
  503: 'ServiceUnavailableError'
};

export class HttpError extends Error {
  readonly status: number;
  readonly type: string;
  readonly param: string | null;

  /** `type` defaults to the class name vLLM reports for the status; some answers name another (invalid_request_error). */
  constructor (status: number, message: string, param: string | null = null, type?: string) {
    super(message);
    this.name = 'HttpError';
    this.status = status;
    this.type = type ?? typeByStatus[status] ?? 'BadRequestError';
    this.param = param;
  }
}

export const badRequest = (message: string, param: string | null = null): HttpError => new HttpError(400, message, param);

export function errorJson (err: HttpError): string {
  return JSON.stringify({ error: { message: err.message, type: err.type, param: err.param, code: err.status } });
}

/**
 * The same error as vLLM's Anthropic routes translate it (translate_error_response): {"type":"error","error":
 * {"type","message"}}, the OpenAI error's type kept (BadRequestError, NotFoundError...), the status its code.
 */
export function anthropicErrorJson (err: HttpError): string {
  return JSON.stringify({ type: 'error', error: { type: err.type, message: err.message } });
}
