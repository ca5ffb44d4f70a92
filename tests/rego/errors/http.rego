# `http.send`: regorus has it behind a feature Warden leaves out (no network from a policy).
package errors.http

import rego.v1

default reachable := false

reachable if {
	resp := http.send({"method": "GET", "url": "https://example.com"}) # missing: http.send
	resp.status_code == 200
}
