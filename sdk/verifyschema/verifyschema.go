// Package verifyschema compiles the JSON Schema a switch's shadow
// verification may carry (verify.schema) without ever fetching anything.
// It is apart from sdk/wire so that the wire format, and the limiters that
// import it, stay free of the schema library.
package verifyschema

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// schemaURL names a verify schema inside the compiler; nothing is ever
// fetched from it.
const schemaURL = "https://switchyard.invalid/verify.schema.json"

// errRemoteRef refuses every $ref that leaves the schema document.
var errRemoteRef = errors.New("only local $ref (#...) is allowed; the SDK never fetches a schema")

// localOnly is the compiler's URL loader: it loads nothing, so a $ref to
// anything but a fragment of the schema itself does not compile.
type localOnly struct{}

func (localOnly) Load(string) (any, error) { return nil, errRemoteRef }

// Compile compiles a verify schema (JSON Schema, draft 2020-12
// unless it names another draft in $schema) without fetching anything.
// The error is one line, fit to show against the field verify.schema.
func Compile(raw []byte) (*jsonschema.Schema, error) {
	if len(raw) > wire.MaxVerifySchema {
		return nil, fmt.Errorf("at most %d bytes", wire.MaxVerifySchema)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", oneLine(err))
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, errors.New("must be a JSON object (a JSON Schema)")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(localOnly{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, errors.New(oneLine(err))
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, errors.New(oneLine(err))
	}
	return s, nil
}

// oneLine joins a multi-line message with single spaces and calls the
// schema by its field name rather than its internal URL.
func oneLine(err error) string {
	msg := strings.ReplaceAll(err.Error(), schemaURL, "verify.schema")
	return strings.Join(strings.Fields(msg), " ")
}
