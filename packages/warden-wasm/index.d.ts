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
export type JsonRpcResponse = { jsonrpc: "2.0"; id: unknown; result?: any; error?: any };
// The name this type had first. Exported under it, but not declared under it here: inside this
// file `Response` is the fetch API's (what `init` accepts).
export type { JsonRpcResponse as Response };

export interface GuardianOptions {
  /** Attach the rules that ran and their checks (`result.policy_data.warden`). */
  explain?: boolean;
  /** Answer decision failures with a JSON-RPC error instead of a deny. */
  failWithError?: boolean;
}

export interface Guardian {
  /** One request envelope (object or JSON text) in, its response out. */
  handle(request: object | string): JsonRpcResponse;
  /** A trace, one request per line, as `warden replay` runs it. */
  replay(trace: string): { line: number; response: JsonRpcResponse }[];
  /** Builds the envelope for `hook` (e.g. "toolCallRequest") and decides it. */
  decide(hook: string, payload: object, metadata?: object): JsonRpcResponse;
}

export interface GuardianStatic {
  new (policy: Policy, options?: GuardianOptions): Guardian;
}

/** One failed step of a scenario test (or a test that could not run). */
export interface TestFailure {
  step: string;
  file: string;
  line: number;
  column: number;
  method: string | null;
  request_id: string | null;
  expected: string | null;
  actual: string | null;
  message: string;
  fired: string[];
  /** The explain trace of the step's decision, as `warden replay --explain` gives it. */
  trace: any[];
}

/** `warden test --format json`'s document for one policy (docs/testing.md). */
export interface TestReport {
  version: 1;
  summary: { passed: number; failed: number; skipped: number; load_errors: number; line: string };
  tests: {
    file: string;
    name: string;
    status: "passed" | "failed" | "skipped";
    steps: number;
    duration_ms: number;
    failures: TestFailure[];
  }[];
  load_errors: { file: string; diagnostics: string }[];
  coverage: { rules_total: number; rules_fired: number; percent: number; rules: any[] };
}

export interface Warden {
  Policy: PolicyStatic;
  Guardian: GuardianStatic;
  PolicyError: typeof PolicyError;
  /** Errors and warnings of a policy's source (empty when clean). */
  check(text: string, name?: string): Diagnostic[];
  /** The source formatted as `warden fmt` does; throws PolicyError if it does not parse. */
  fmt(text: string): string;
  /** Runs the policy's `test` blocks; throws PolicyError if the policy does not load. */
  runTests(text: string, name?: string): TestReport;
}

/**
 * Instantiates the module (once) and returns the API. In browsers and bundlers `wasm` says
 * where the module is (default: the `.wasm` beside the package's glue); under Node it is read
 * from the package and `wasm` is ignored.
 */
export function init(
  wasm?: string | URL | Request | Response | BufferSource | WebAssembly.Module | Promise<Response>,
): Promise<Warden>;
