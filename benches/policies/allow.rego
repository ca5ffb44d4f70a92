# Data only: folded into the Warden program when the policy loads.
package bench.allow

import rego.v1

allowed := {"read_file", "search", "send_email", "list_files"}
