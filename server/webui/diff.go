package webui

import (
	"encoding/json"
	"sort"

	"github.com/switchyard-io/switchyard/audit"
)

// Change is one field that differs between an audit event's before and
// after states.
type Change struct {
	Field, Before, After string
}

// ignoredFields change with every write and say nothing on their own.
var ignoredFields = map[string]bool{"updated_at": true, "updated_by": true, "reason": true, "version": true}

// diff lists the top-level fields that differ between two JSON objects (an
// empty side is "absent").
func diff(before, after string) []Change {
	var b, a map[string]json.RawMessage
	_ = json.Unmarshal([]byte(before), &b)
	_ = json.Unmarshal([]byte(after), &a)
	keys := map[string]bool{}
	for k := range b {
		keys[k] = true
	}
	for k := range a {
		keys[k] = true
	}
	var out []Change
	for k := range keys {
		bv, av := compact(b[k]), compact(a[k])
		if bv == av || ignoredFields[k] {
			continue
		}
		out = append(out, Change{Field: k, Before: bv, After: av})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

func compact(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// EventRow is an audit event with its diff, for the history and the log.
type EventRow struct {
	audit.Event
	Changes []Change
	// Restorable is true when the event recorded a state to roll back to.
	Restorable bool
}

func eventRows(events []audit.Event) []EventRow {
	out := make([]EventRow, 0, len(events))
	for _, e := range events {
		out = append(out, EventRow{Event: e, Changes: diff(e.Before, e.After), Restorable: e.After != ""})
	}
	return out
}
