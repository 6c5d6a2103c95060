package server

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// Patch is the body of every PATCH: an RFC 7396 JSON merge patch of the
// entity's fields, beside the bookkeeping members reason and version.
// Members the patch names replace the entity's, objects merge member by
// member, arrays are replaced whole, and null removes a member: an
// optional field goes back to its default.
type Patch struct {
	Version *int64
	Reason  string
	// Fields is the merge patch without reason and version (a JSON
	// object; "{}" when the body names nothing else).
	Fields json.RawMessage
}

// MarshalJSON writes the patch as it was sent (UnmarshalJSON's inverse),
// so a change request stores it exactly.
func (p Patch) MarshalJSON() ([]byte, error) {
	m := map[string]json.RawMessage{}
	if len(p.Fields) > 0 {
		if err := json.Unmarshal(p.Fields, &m); err != nil {
			return nil, err
		}
	}
	if p.Version != nil {
		m["version"], _ = json.Marshal(*p.Version)
	}
	m["reason"], _ = json.Marshal(p.Reason)
	return json.Marshal(m)
}

// UnmarshalJSON splits the bookkeeping members from the fields.
func (p *Patch) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if m == nil {
		return &FieldError{Field: "body", Msg: "must be a JSON object (a merge patch)"}
	}
	for key, dst := range map[string]any{"version": &p.Version, "reason": &p.Reason} {
		if raw, ok := m[key]; ok {
			delete(m, key)
			if err := json.Unmarshal(raw, dst); err != nil {
				return &FieldError{Field: key, Msg: "has the wrong type"}
			}
		}
	}
	fields, err := json.Marshal(m)
	p.Fields = fields
	return err
}

// PatchOf is the merge patch of a typed patch (the form Go callers
// use): fields maps each member to a pointer, and every non-nil one is a
// member of the patch.
func PatchOf(fields map[string]any) Patch {
	m := map[string]any{}
	for k, v := range fields {
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
			m[k] = v
		}
	}
	b, _ := json.Marshal(m)
	return Patch{Fields: b}
}

// Names reports whether the patch names the top-level member field (with
// a value or null).
func (p *Patch) Names(field string) bool {
	_, ok := p.Member(field)
	return ok
}

// Member returns the top-level member field of the patch as written
// (null included) and whether the patch has it.
func (p *Patch) Member(field string) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(p.Fields, &m)
	v, ok := m[field]
	return v, ok
}

// Without returns the patch without the top-level members fields.
func (p *Patch) Without(fields ...string) Patch {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(p.Fields, &m)
	for _, f := range fields {
		delete(m, f)
	}
	out := *p
	out.Fields, _ = json.Marshal(m)
	return out
}

// Merge applies the patch to doc (the entity's fields as the API shows
// them, marshalled to JSON) and decodes the result into into, strictly:
// the returned errors name every unknown member and every member of the
// wrong type, so the caller validates the merged result and answers them
// all at once.
func (p *Patch) Merge(doc, into any) FieldErrors {
	cur, err := json.Marshal(doc)
	if err != nil {
		return FieldErrors{{Field: "body", Msg: "cannot be merged: " + err.Error()}}
	}
	fields := p.Fields
	if len(bytes.TrimSpace(fields)) == 0 {
		fields = json.RawMessage("{}")
	}
	return DecodeJSON(MergePatch(cur, fields), into)
}

// MergePatch applies the JSON merge patch patch to the document target
// (RFC 7396): an object patch merges member by member, recursively, null
// removing a member; any other patch replaces the target. Both must be
// JSON; a target that is not is treated as absent.
func MergePatch(target, patch []byte) []byte {
	var t, p any
	_ = decodeNumbers(target, &t)
	if err := decodeNumbers(patch, &p); err != nil {
		return patch
	}
	out, _ := json.Marshal(mergeValue(t, p))
	return out
}

// decodeNumbers decodes b into v keeping numbers as they are written.
func decodeNumbers(b []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

func mergeValue(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
			continue
		}
		tm[k] = mergeValue(tm[k], v)
	}
	return tm
}
