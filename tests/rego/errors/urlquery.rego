# `urlquery.*`: regorus has it behind a feature Warden leaves out (url and ICU).
package errors.urlquery

import rego.v1

link := sprintf("https://tickets.example/?%s", [urlquery.encode_object({"q": input.payload.tool.name})]) # missing: urlquery.encode_object
