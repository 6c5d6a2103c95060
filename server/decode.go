package server

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// DecodeStrict decodes one JSON document into v, refusing unknown members,
// members of the wrong type and trailing data. Every such member is
// reported, each under its JSON path ("steps[0].percent"), in one
// ValidationError.
func DecodeStrict(b []byte, v any) error {
	return DecodeJSON(b, v).Err()
}

// DecodeJSON decodes one JSON document into v as far as it can and returns
// every unknown member and every member of the wrong type, each under its
// JSON path. The members it reports are left out of v, so a caller can go
// on validating the rest and report everything at once. A document that is
// not JSON at all is one error on "body", and v is left untouched.
func DecodeJSON(b []byte, v any) FieldErrors {
	dec := json.NewDecoder(bytes.NewReader(b))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return FieldErrors{{Field: "body", Msg: "is not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")}}
	}
	if dec.More() {
		return FieldErrors{{Field: "body", Msg: "must hold exactly one JSON object"}}
	}
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		panic("server: DecodeJSON needs a pointer")
	}
	var d jsonChecker
	kept := d.check(raw, t.Elem(), "")
	if kept == nil {
		return d.errs
	}
	if err := json.Unmarshal(kept, v); err != nil {
		// The check above mirrors encoding/json; should they ever differ,
		// the request is still refused, naming the body.
		d.errs.Add("body", strings.TrimPrefix(err.Error(), "json: "))
	}
	return d.errs
}

// jsonChecker walks a JSON document along the Go type it is decoded into.
type jsonChecker struct{ errs FieldErrors }

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// check reports what of raw does not fit t under path and returns raw
// without it (nil: nothing of raw fits).
func (d *jsonChecker) check(raw json.RawMessage, t reflect.Type, path string) json.RawMessage {
	if string(raw) == "null" {
		return raw // encoding/json leaves the value as it is
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	at := cmpOrBody(path)
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				d.errs.Add(joinPath(path, fe.Field), fe.Msg)
			} else {
				d.errs.Add(at, typeMessage(err, t))
			}
			return nil
		}
		return raw
	}
	switch t.Kind() {
	case reflect.Struct:
		members, ok := objectMembers(raw)
		if !ok {
			d.errs.Add(at, "must be an object")
			return nil
		}
		fields := jsonFields(t)
		out := make([]member, 0, len(members))
		for _, m := range members {
			ft, ok := fields.lookup(m.name)
			if !ok {
				d.errs.Add(joinPath(path, m.name), "is not a known field")
				continue
			}
			if v := d.check(m.value, ft, joinPath(path, m.name)); v != nil {
				out = append(out, member{m.name, v})
			}
		}
		return encodeObject(out)
	case reflect.Map:
		members, ok := objectMembers(raw)
		if !ok {
			d.errs.Add(at, "must be an object")
			return nil
		}
		out := make([]member, 0, len(members))
		for _, m := range members {
			if v := d.check(m.value, t.Elem(), joinPath(path, m.name)); v != nil {
				out = append(out, member{m.name, v})
			}
		}
		return encodeObject(out)
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			break // base64 text
		}
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) != nil {
			d.errs.Add(at, "must be an array")
			return nil
		}
		for i, e := range elems {
			if elems[i] = d.check(e, t.Elem(), path+"["+strconv.Itoa(i)+"]"); elems[i] == nil {
				elems[i] = json.RawMessage("null")
			}
		}
		out, _ := json.Marshal(elems)
		return out
	case reflect.Interface:
		return raw
	}
	if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
		d.errs.Add(at, typeMessage(err, t))
		return nil
	}
	return raw
}

// typeMessage says what a member that failed to decode into t must be.
func typeMessage(err error, t reflect.Type) string {
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		return "must be " + jsonTypeName(ute.Type)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func cmpOrBody(path string) string {
	if path == "" {
		return "body"
	}
	return path
}

// joinPath is the path of member name under path.
func joinPath(path, name string) string {
	if path == "" || name == "" {
		return path + name
	}
	return path + "." + name
}

type member struct {
	name  string
	value json.RawMessage
}

// objectMembers returns the members of a JSON object in document order.
func objectMembers(raw json.RawMessage) ([]member, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, member{name, v})
	}
	return out, true
}

func encodeObject(ms []member) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(m.name)
		b.Write(name)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// fieldSet maps the JSON names of a struct's members (embedded structs'
// included, the shallower winning, as encoding/json does) to their types.
type fieldSet map[string]reflect.Type

// lookup finds a member by name; like encoding/json, an exact match first,
// then one that differs only in case.
func (f fieldSet) lookup(name string) (reflect.Type, bool) {
	if t, ok := f[name]; ok {
		return t, true
	}
	for n, t := range f {
		if strings.EqualFold(n, name) {
			return t, true
		}
	}
	return nil, false
}

var fieldSets sync.Map // reflect.Type → fieldSet

func jsonFields(t reflect.Type) fieldSet {
	if f, ok := fieldSets.Load(t); ok {
		return f.(fieldSet)
	}
	f := fieldSet{}
	depth := map[string]int{}
	var walk func(t reflect.Type, level int)
	walk = func(t reflect.Type, level int) {
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			ft := sf.Type
			if sf.Anonymous && name == "" {
				et := ft
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if et.Kind() == reflect.Struct {
					walk(et, level+1)
					continue
				}
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			if d, seen := depth[name]; !seen || level < d {
				f[name], depth[name] = ft, level
			}
		}
	}
	walk(t, 0)
	fieldSets.Store(t, f)
	return f
}
