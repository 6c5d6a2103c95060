package webui

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/audit"
)

// Change is one field that differs between an audit event's before and
// after states.
type Change struct {
	Field, Before, After string
}

// ignoredFields change with every write and say nothing on their own.
var ignoredFields = map[string]bool{"updated_at": true, "updated_by": true, "created_at": true, "reason": true, "version": true}

// diff lists the top-level fields that differ between two JSON objects (an
// empty side is "absent"): what an operator looks for first (state, level,
// mode, rollout), then the other fields, then times, which read to the
// second.
func diff(before, after string) []Change {
	b, a := flatten(before), flatten(after)
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
		if keyListFields[k] {
			out = append(out, keyListChange(k, b[k], a[k]))
			continue
		}
		out = append(out, Change{Field: k, Before: seconds(bv), After: seconds(av)})
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := fieldRank(out[i]), fieldRank(out[j])
		if ri != rj {
			return ri < rj
		}
		return out[i].Field < out[j].Field
	})
	return out
}

// keyListFields are a rollout's key lists, up to 10,000 keys each: a
// diff shows their counts and the keys added and removed, not both lists.
var keyListFields = map[string]bool{"rollout.include": true, "rollout.exclude": true}

// maxListedKeys bounds the keys a key-list change names.
const maxListedKeys = 20

// keyListChange is the change of a key list: "3 keys" → "4 keys: +t4".
func keyListChange(field string, before, after json.RawMessage) Change {
	var b, a []string
	_ = json.Unmarshal(before, &b)
	_ = json.Unmarshal(after, &a)
	had := make(map[string]bool, len(b))
	for _, k := range b {
		had[k] = true
	}
	has := make(map[string]bool, len(a))
	var moved []string
	for _, k := range a {
		has[k] = true
		if !had[k] {
			moved = append(moved, "+"+k)
		}
	}
	for _, k := range b {
		if !has[k] {
			moved = append(moved, "−"+k)
		}
	}
	shown := count(len(a), "key")
	if len(moved) > maxListedKeys {
		moved = append(moved[:maxListedKeys], fmt.Sprintf("… %d more", len(moved)-maxListedKeys))
	}
	if len(moved) > 0 {
		shown += ": " + strings.Join(moved, " ")
	}
	return Change{Field: field, Before: count(len(b), "key"), After: shown}
}

// leadingFields come first in a diff, in this order.
var leadingFields = []string{"state", "level", "mode", "kind", "rollout"}

// fieldRank orders a change: leading fields, then the rest, then times.
func fieldRank(c Change) int {
	for i, f := range leadingFields {
		if c.Field == f || strings.HasPrefix(c.Field, f+".") {
			return i
		}
	}
	if isTime(c.Before) || isTime(c.After) {
		return len(leadingFields) + 1
	}
	return len(leadingFields)
}

// isTime reports whether s is a time as seconds shows it.
func isTime(s string) bool {
	_, err := time.Parse(stampLayout, s)
	return err == nil
}

// seconds shows an RFC 3339 time to the second, in UTC; anything else as
// it is.
func seconds(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format(stampLayout)
}

// flatten decodes a JSON object; nested objects (such as rollout) become
// dotted keys ("rollout.percent"), except opaque payloads such as fallback.
func flatten(doc string) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(doc), &m) != nil {
		return nil
	}
	for k, v := range m {
		var inner map[string]json.RawMessage
		if k == "fallback" || json.Unmarshal(v, &inner) != nil {
			continue
		}
		delete(m, k)
		for ik, iv := range inner {
			m[k+"."+ik] = iv
		}
	}
	return m
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
	// Restorable is true when the event is a change of the switch that
	// recorded its state after (what RollbackSwitch accepts): a job's own
	// events on the switch (a trigger's transition) and drift are not.
	Restorable bool
}

func eventRows(events []audit.Event) []EventRow {
	out := make([]EventRow, 0, len(events))
	for _, e := range events {
		out = append(out, EventRow{Event: e, Changes: diff(e.Before, e.After), Restorable: e.After != "" && e.Action.Entity() == "switch"})
	}
	return out
}
