// The JavaScript half of @warden/wasm (docs/wasm.md): turns the WebAssembly module's JSON
// text into objects and its thrown errors into PolicyError. `bind` takes the instantiated
// wasm-bindgen module; index.js (browsers, bundlers) and node.js (Node) instantiate it.

export class PolicyError extends Error {
  constructor(message, diagnostics) {
    super(message);
    this.name = "PolicyError";
    this.diagnostics = diagnostics;
  }
}

// The wasm side throws "<rendered diagnostics>\n<JSON array>": split them.
function rethrow(e) {
  const text = String(e && e.message !== undefined ? e.message : e);
  const cut = text.lastIndexOf("\n[");
  if (cut >= 0) {
    try {
      return new PolicyError(text.slice(0, cut), JSON.parse(text.slice(cut + 1)));
    } catch (_) {
      /* not ours: fall through */
    }
  }
  return e;
}

export function bind(raw) {
  class Policy {
    constructor(inner) {
      this.inner = inner;
    }
    static fromSource(text, name = "policy") {
      try {
        return new Policy(raw.Policy.fromSource(text, name));
      } catch (e) {
        throw rethrow(e);
      }
    }
    static default() {
      return new Policy(raw.Policy.defaultPolicy());
    }
    get digest() {
      return this.inner.digest;
    }
    get warnings() {
      return JSON.parse(this.inner.warningsJson);
    }
  }

  class Guardian {
    constructor(policy, { explain = false, failWithError = false } = {}) {
      this.inner = new raw.Guardian(policy.inner, explain, failWithError);
    }
    handle(request) {
      const text = typeof request === "string" ? request : JSON.stringify(request);
      return JSON.parse(this.inner.handle(text));
    }
    replay(trace) {
      return JSON.parse(this.inner.replayJson(trace));
    }
    decide(hook, payload, metadata = {}) {
      return JSON.parse(this.inner.decideJson(hook, JSON.stringify(payload), JSON.stringify(metadata)));
    }
  }

  return {
    Policy,
    Guardian,
    PolicyError,
    check: (text, name = "policy") => JSON.parse(raw.checkJson(text, name)),
    runTests: (text, name = "policy") => {
      try {
        return JSON.parse(raw.runTestsJson(text, name));
      } catch (e) {
        throw rethrow(e);
      }
    },
    fmt: (text) => {
      try {
        return raw.fmt(text);
      } catch (e) {
        throw rethrow(e);
      }
    },
  };
}
