# Conformance corpus: time builtins over timestamps the input carries (never the clock).
package corpus.clock

import rego.v1

ns := time.parse_rfc3339_ns(input.at)

date := time.date(ns)

clock := time.clock(ns)

weekday := time.weekday(ns)

weekend if weekday in {"Saturday", "Sunday"}

office_hours if {
	[h, _, _] := time.clock(ns)
	h >= 9
	h < 17
	not weekend
}

next_month := time.format(time.add_date(ns, 0, 1, 0))

age := time.diff(ns, time.parse_rfc3339_ns("2020-01-01T00:00:00Z"))

window_ns := time.parse_duration_ns(input.window)

expired if ns + window_ns < time.parse_rfc3339_ns("2026-01-01T00:00:00Z")

day := time.parse_ns("2006-01-02", input.day)

in_zone := time.date([ns, "America/New_York"])
