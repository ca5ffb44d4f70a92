// Types of @warden/wasm (docs/wasm.md).

/** One checker diagnostic; lines and columns are 1-based. */
export interface Diagnostic {
  file: string;
  line: number;
  column: number;
  end_line: number;
  end_column: number;
  severity: "error" | "warning";
  code: string;
  message: string;
  help: string | null;
}

/** A policy that does not load or parse: `message` is the rendered diagnostics. */
export class PolicyError extends Error {
  diagnostics: Diagnostic[];
}

export interface Policy {
  readonly digest: string;
  readonly warnings: Diagnostic[];
}

export interface PolicyStatic {
  /** Checks and compiles a policy; throws PolicyError. `name` is its module name. */
  fromSource(text: string, name?: string): Policy;
  /** The default policy built into Warden. */
  default(): Policy;
}

/** A JSON-RPC response envelope, as ACS defines it. */
export type Response = { jsonrpc: "2.0"; id: unknown; result?: any; error?: any };

export interface GuardianOptions {
  /** Attach the rules that ran and their checks (`result.policy_data.warden`). */
  explain?: boolean;
  /** Answer decision failures with a JSON-RPC error instead of a deny. */
  failWithError?: boolean;
}

export interface Guardian {
  /** One request envelope (object or JSON text) in, its response out. */
  handle(request: object | string): Response;
  /** A trace, one request per line, as `warden replay` runs it. */
  replay(trace: string): { line: number; response: Response }[];
  /** Builds the envelope for `hook` (e.g. "toolCallRequest") and decides it. */
  decide(hook: string, payload: object, metadata?: object): Response;
}

export interface GuardianStatic {
  new (policy: Policy, options?: GuardianOptions): Guardian;
}

export interface Warden {
  Policy: PolicyStatic;
  Guardian: GuardianStatic;
  PolicyError: typeof PolicyError;
  /** Errors and warnings of a policy's source (empty when clean). */
  check(text: string, name?: string): Diagnostic[];
  /** The source formatted as `warden fmt` does; throws PolicyError if it does not parse. */
  fmt(text: string): string;
}

/** Instantiates the module (once) and returns the API. */
export function init(wasm?: string | URL | Response | BufferSource | WebAssembly.Module): Promise<Warden>;
