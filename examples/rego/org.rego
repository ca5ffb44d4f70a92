# Organisation-wide rules shared with OPA. Data only: Warden folds these at load time.
package org.rules

import rego.v1

# Domains the agent may send mail to.
allowed_mail_domains := {"example.com", "partner.example.org"}

# Sources whose tool output is trusted.
trusted_sources := {"vault", "internal-docs"}
