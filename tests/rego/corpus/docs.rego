# Conformance corpus: JSON and object builtins, `walk`.
package corpus.docs

import rego.v1

marshalled := json.marshal(input.doc)

parsed := json.unmarshal(input.text)

valid_json := json.is_valid(input.text)

filtered := json.filter(input.doc, ["a/b", "c"])

removed := json.remove(input.doc, ["a/b"])

patched := json.patch(input.doc, [{"op": "add", "path": "/added", "value": 1}, {"op": "remove", "path": "/c"}])

deep := object.get(input.doc, ["a", "b"], "none")

top_keys := object.keys(input.doc)

merged := object.union(input.doc, {"c": "override", "z": true})

without_c := object.remove(input.doc, ["c"])

only_a := object.filter(input.doc, ["a"])

subset if object.subset(input.doc, {"c": 3})

strings_in_doc := {v | walk(input.doc, [_, v]); is_string(v)}

paths_to_numbers := [p | walk(input.doc, [p, v]); is_number(v)]

pretty := json.marshal_with_options(input.doc, {"pretty": true, "indent": "  "})
