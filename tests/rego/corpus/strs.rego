# Conformance corpus: string builtins over the input's `s` (a string, or something else).
package corpus.strs

import rego.v1

norm := lower(trim_space(input.s))

words := split(norm, " ")

word_count := count([w | some w in words; w != ""])

initials := concat("", [upper(substring(w, 0, 1)) | some w in words; w != ""])

slug := replace(norm, " ", "-")

first_at := indexof(input.s, "@")

all_at := indexof_n(input.s, "@")

quoted := sprintf("%q has %d characters", [input.s, count(input.s)])

has_prefix if strings.any_prefix_match(input.s, ["http://", "https://"])

host := h if {
	startswith(input.s, "https://")
	h := split(trim_prefix(input.s, "https://"), "/")[0]
}

reversed := strings.reverse(input.s)

dots := strings.count(input.s, ".")

stripped := trim(input.s, " .!")

right := trim_right(input.s, "!")

suffix_gone := trim_suffix(input.s, ".com")

two_replaced := strings.replace_n({"a": "4", "e": "3"}, input.s)

as_number := to_number(input.s)

hex_of := format_int(to_number(input.s), 16)

mentions_secret if contains(lower(input.s), "secret")

kind := type_name(input.s)
