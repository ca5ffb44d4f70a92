# A builtin regorus does not implement.
package errors.jwt

import rego.v1

claims := io.jwt.decode(input.payload.arguments.token.value) # missing: io.jwt.decode
