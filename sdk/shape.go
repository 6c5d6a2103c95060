package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// This file compares a live and a degraded answer by shape: the JSON type
// at every path, the key set of every object, and the required fields.
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

// shapeDiffs returns how degraded differs in shape from live, at most
// wire.MaxVerifyDiffs differences, each "pointer: what" ("/items:
// missing", "/total: number, degraded string"). A null on either side
// matches any type (an absent optional value); two non-empty arrays are
// compared by their first elements. Every required pointer that resolves
// in live must resolve in degraded ("/currency: required, missing").
func shapeDiffs(live, degraded any, required []wire.Pointer) []string {
	d := differ{}
	d.walk("", live, degraded)
	for _, p := range required {
		if !p.Resolve(live) || p.Resolve(degraded) {
			continue
		}
		if i := slices.Index(d.out, p.String()+": missing"); i >= 0 {
			d.out[i] = p.String() + ": required, missing" // the walk found it first
			continue
		}
		d.add(p.String(), "required, missing")
	}
	return d.out
}

type differ struct{ out []string }

func (d *differ) add(path, what string) {
	if len(d.out) >= wire.MaxVerifyDiffs {
		return
	}
	if path == "" {
		path = "(document)"
	}
	if len(path) > maxDiffPath {
		path = path[:maxDiffPath] + "…"
	}
	d.out = append(d.out, path+": "+what)
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
