# Conformance corpus: regular expressions and globs.
package corpus.patterns

import rego.v1

ticket if regex.match(`^[A-Z]{2,5}-[0-9]+$`, input.s)

numbers := regex.find_n(`[0-9]+`, input.s, -1)

first_two := regex.find_n(`[a-z]+`, input.s, 2)

parts := regex.split(`[,;]\s*`, input.s)

masked := regex.replace(input.s, `[0-9]`, "#")

pairs := regex.find_all_string_submatch_n(`(\w+)=(\w+)`, input.s, -1)

valid_pattern := regex.is_valid(input.s)

# The input is a pattern: an invalid one is an error.
matches_pattern if regex.match(input.s, "abc")

templated if regex.template_match("urn:{[a-z]+}:{[0-9]+}", input.s, "{", "}")

host_glob if glob.match("*.example.com", ["."], input.s)

any_glob if glob.match("*.example.com", [], input.s)

path_glob if glob.match("/data/**/*.csv", ["/"], input.s)

class_glob if glob.match("file-[0-9][!a-z].{txt,md}", [], input.s)

quoted_meta := glob.quote_meta(input.s)

hostname := h if {
	[_, h] := regex.find_all_string_submatch_n(`^https?://([^/:]+)`, input.s, 1)[0]
}
