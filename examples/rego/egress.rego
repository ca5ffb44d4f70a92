# Egress checks that read the event: Warden calls these at decision time.
package org.egress

import rego.v1

# The recipient's domain is on the allow-list in the data document.
allowed_recipient(addr) if {
	parts := split(addr, "@")
	count(parts) == 2
	parts[1] in data.mail.allowed_domains
}

# Large attachments need a second look.
default oversized := false

oversized if input.payload.arguments.attachment_kb.value > 5000

# OPA-style deny set: one message per violation.
deny contains msg if {
	input.payload.tool.name == "send_email"
	contains(lower(input.payload.arguments.subject.value), "password")
	msg := "subject mentions a password"
}
