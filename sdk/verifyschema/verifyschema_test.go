package verifyschema

import (
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// TestCompile: a local schema compiles (local $ref included); one
// that does not compile, a $ref that leaves the document, a non-object
// and an oversized schema are refused with a one-line message.
func TestCompile(t *testing.T) {
	for _, ok := range []string{
		`{"type":"object","required":["items"]}`,
		`{"$defs":{"sku":{"type":"string"}},"properties":{"sku":{"$ref":"#/$defs/sku"}}}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`,
	} {
		if _, err := Compile([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"nope"}`, `"verify.schema#" is not valid against metaschema`},
		{`{"pattern":"("}`, "not valid regex"},
		{`{"$ref":"https://schemas.example/page.json"}`, "only local $ref"},
		{`{"$ref":"file:///etc/passwd"}`, "only local $ref"},
		{`{"$ref":"page.json"}`, "only local $ref"},
		{`{"$schema":"https://schemas.example/meta"}`, "only local $ref"},
		{`{"$ref":"#/$defs/none"}`, "not found"},
		{`[{"type":"object"}]`, "must be a JSON object"},
		{`{"description":"` + strings.Repeat("x", wire.MaxVerifySchema) + `"}`, "at most 16384 bytes"},
	} {
		_, err := Compile([]byte(tc.schema))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%.60s: error %v, want one line containing %q", tc.schema, err, tc.want)
		}
	}
}
