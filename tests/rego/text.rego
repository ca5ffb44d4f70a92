# Text checks over the event: regular expressions, globs and a walk of the arguments.
package acme.text

import rego.v1

ticket_id(s) if regex.match(`^[A-Z]{2,5}-[0-9]+$`, s)

numbers_in(s) := regex.find_n(`[0-9]+`, s, -1)

masked(s) := regex.replace(s, `[0-9]`, "#")

internal_host(h) if glob.match("*.corp.example", ["."], h)

# Every string anywhere in the arguments, however deeply nested.
argument_strings := sort([v | walk(input.payload.arguments, [_, v]); is_string(v)])

card_like := [k |
	some k, a in input.payload.arguments
	regex.match(`^[0-9]{4}( ?[0-9]{4}){3}$`, a.value)
]

recent_client(v) if semver.compare(v, "2.1.0") >= 0

encoded(s) := base64.encode(s)

hex_of(s) := hex.encode(s)
