// The playground's shareable state: the policy and the trace, each UTF-8 text in base64url, in
// the page's fragment (`#policy=…&trace=…&panel=trace`). A fragment never reaches a server.

export function toBase64url(text) {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

// Throws on text that is not base64url of UTF-8.
export function fromBase64url(encoded) {
  const b64 = encoded.replace(/-/g, "+").replace(/_/g, "/");
  const binary = atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
}

// "#policy=…&trace=…&panel=…" from {policy, trace, panel}.
export function encodeFragment({ policy = "", trace = "", panel = "trace" }) {
  return `#policy=${toBase64url(policy)}&trace=${toBase64url(trace)}&panel=${encodeURIComponent(panel)}`;
}

// {policy, trace, panel} from a fragment (with or without its "#"); a part that is missing is
// undefined, one that does not decode is reported in `errors`.
export function decodeFragment(fragment) {
  const out = { errors: [] };
  const params = new URLSearchParams(fragment.replace(/^#/, ""));
  for (const key of ["policy", "trace"]) {
    const value = params.get(key);
    if (value === null) continue;
    try {
      out[key] = fromBase64url(value);
    } catch (e) {
      out.errors.push(`the link's ${key} is not base64url text (${e.message})`);
    }
  }
  const panel = params.get("panel");
  if (panel === "trace" || panel === "tests") out.panel = panel;
  return out;
}
