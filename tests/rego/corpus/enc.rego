# Conformance corpus: encodings, semantic versions, networks, units.
package corpus.enc

import rego.v1

b64 := base64.encode(input.s)

b64_back := base64.decode(input.b64)

b64url := base64url.encode_no_pad(input.s)

hexed := hex.encode(input.s)

valid_b64 if base64.is_valid(input.b64)

newer if semver.compare(input.version, "1.4.0") > 0

valid_version := semver.is_valid(input.version)

private_ip if {
	some cidr in ["10.0.0.0/8", "192.168.0.0/16", "172.16.0.0/12"]
	net.cidr_contains(cidr, input.ip)
}

valid_cidr := net.cidr_is_valid(input.cidr)

size_bytes := units.parse_bytes(input.size)

quantity := units.parse(input.size)
