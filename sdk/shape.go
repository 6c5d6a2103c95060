package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// This file compares a live and a degraded answer by shape: the JSON type
// at every path, the key set of every object, the required fields and,
// when the switch has one, its JSON Schema.
// Differences name JSON pointers and types, never values, so they can
// leave the process (fleet reports, findings) without leaking data.

// maxDiffPath bounds one pointer in a difference.
const maxDiffPath = 200

// jsonType names the JSON type of a value decoded by encoding/json.
func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number, float64:
		return "number"
	case bool:
		return "bool"
	}
	return "null"
}

// decodeJSON decodes a whole JSON document; ok is false when b is not one.
func decodeJSON(b []byte) (v any, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&v) != nil || dec.More() {
		return nil, false
	}
	return v, true
}

// shapeDiff is one difference of shape: a JSON pointer ("" the document)
// and what differs there.
type shapeDiff struct{ path, what string }

// String is "pointer: what" ("/items: missing", "/total: number, degraded
// string"), the pointer cut at maxDiffPath bytes.
func (d shapeDiff) String() string {
	p := d.path
	if p == "" {
		p = "(document)"
	}
	if len(p) > maxDiffPath {
		p = p[:maxDiffPath] + "…"
	}
	return p + ": " + d.what
}

// required marks the difference of a required field.
const requiredMissing = "required, missing"

// shapeDiffs returns how degraded differs in shape from live, at most
// limit differences. A null on either side matches any type (an absent
// optional value); two non-empty arrays are compared by their first
// elements. Every required pointer that resolves in live must resolve in
// degraded ("/currency: required, missing").
func shapeDiffs(live, degraded any, required []wire.Pointer, limit int) []shapeDiff {
	d := differ{limit: limit}
	d.walk("", live, degraded)
	for _, p := range required {
		if !p.Resolve(live) || p.Resolve(degraded) {
			continue
		}
		if i := slices.Index(d.out, shapeDiff{p.String(), "missing"}); i >= 0 {
			d.out[i].what = requiredMissing // the walk found it first
			continue
		}
		d.add(p.String(), requiredMissing)
	}
	return d.out
}

// schemaPrefix starts the difference of a schema violation.
const schemaPrefix = "schema "

// schemaDiffs returns where degraded violates schema (nil: none), at most
// limit differences: the pointer and the failing keyword ("/items/0/price:
// schema type", "/currency: schema required, missing"), never the
// validator's message, which may quote values.
func schemaDiffs(schema *jsonschema.Schema, degraded any, limit int) []shapeDiff {
	if schema == nil || limit <= 0 {
		return nil
	}
	var verr *jsonschema.ValidationError
	if err := schema.Validate(degraded); err == nil || !errors.As(err, &verr) {
		return nil
	}
	d := differ{limit: limit}
	var leaves func(e *jsonschema.ValidationError)
	leaves = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				leaves(c)
			}
			return
		}
		var path strings.Builder
		for _, tok := range e.InstanceLocation {
			path.WriteString("/" + escapePointer(tok))
		}
		if req, ok := e.ErrorKind.(*kind.Required); ok {
			for _, name := range req.Missing {
				d.add(path.String()+"/"+escapePointer(name), schemaPrefix+requiredMissing)
			}
			return
		}
		d.add(path.String(), schemaPrefix+strings.Join(e.ErrorKind.KeywordPath(), "/"))
	}
	leaves(verr)
	return d.out
}

// withoutNoise drops the differences at paths where two live answers
// already differ (Diffy's primary against a second primary): what varies
// between live answers is no sign of a rotten fallback. A required field
// and a schema violation are never noise.
func withoutNoise(diffs, noise []shapeDiff) []shapeDiff {
	kept := diffs[:0:0]
	for _, d := range diffs {
		if d.what == requiredMissing || strings.HasPrefix(d.what, schemaPrefix) || !slices.ContainsFunc(noise, func(n shapeDiff) bool { return n.path == d.path }) {
			kept = append(kept, d)
		}
	}
	return kept
}

type differ struct {
	limit int
	out   []shapeDiff
}

func (d *differ) add(path, what string) {
	if len(d.out) < d.limit {
		d.out = append(d.out, shapeDiff{path, what})
	}
}

func (d *differ) walk(path string, live, degraded any) {
	lt, dt := jsonType(live), jsonType(degraded)
	switch {
	case lt == "null" || dt == "null":
		return
	case lt != dt:
		d.add(path, fmt.Sprintf("%s, degraded %s", lt, dt))
		return
	}
	switch l := live.(type) {
	case map[string]any:
		dg := degraded.(map[string]any)
		for _, k := range sortedKeys(l) {
			p := path + "/" + escapePointer(k)
			if dv, ok := dg[k]; ok {
				d.walk(p, l[k], dv)
			} else {
				d.add(p, "missing")
			}
		}
		for _, k := range sortedKeys(dg) {
			if _, ok := l[k]; !ok {
				d.add(path+"/"+escapePointer(k), "unexpected")
			}
		}
	case []any:
		dg := degraded.([]any)
		if len(l) > 0 && len(dg) > 0 {
			d.walk(path+"/0", l[0], dg[0])
		}
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// escapePointer escapes a member name as an RFC 6901 reference token.
func escapePointer(k string) string {
	if !strings.ContainsAny(k, "~/") {
		return k
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
}
