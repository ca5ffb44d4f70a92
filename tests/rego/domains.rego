# URL and e-mail helpers shared with OPA policies.
package acme.domains

import rego.v1

trusted_domains := ["example.com", "docs.example.org"]

host(url) := h if {
	no_scheme := trim_prefix(trim_prefix(url, "https://"), "http://")
	h := split(no_scheme, "/")[0]
}

trusted_url(url) if {
	some d in trusted_domains
	endswith(host(url), d)
}

mail_domain(addr) := split(addr, "@")[1]
