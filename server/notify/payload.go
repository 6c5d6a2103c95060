package notify

import (
	"encoding/json"
	"strings"
	"time"
)

// Payload is the body of a delivery to a channel of format json. The same
// event always has the same body, whichever attempt or leader sends it.
type Payload struct {
	// IdempotencyKey identifies the event: a receiver that has seen it
	// drops the request (a delivery may come twice across a leader crash).
	IdempotencyKey string          `json:"idempotency_key"`
	Kind           Kind            `json:"kind"`
	Namespace      string          `json:"namespace"`
	App            string          `json:"app,omitempty"`
	Target         string          `json:"target,omitempty"`
	Title          string          `json:"title"`
	Body           string          `json:"body,omitempty"`
	Data           json.RawMessage `json:"data"`
	At             time.Time       `json:"at"`
}

// payload returns the event as a Payload.
func (e *row) payload(ns string) Payload {
	data := json.RawMessage(e.Data)
	if !json.Valid(data) {
		data = json.RawMessage("{}")
	}
	return Payload{
		IdempotencyKey: e.EventKey, Kind: Kind(e.Kind), Namespace: ns, App: e.App, Target: e.Target,
		Title: e.Title, Body: e.Body, Data: data, At: e.CreatedAt.UTC(),
	}
}

// body encodes the event in format.
func (e *row) body(format, ns string) ([]byte, error) {
	p := e.payload(ns)
	if format != FormatSlack {
		return json.Marshal(p)
	}
	text := "[" + slackEscape(ns) + "] " + slackEscape(p.Title)
	section := "*" + slackEscape(p.Title) + "*"
	if p.Body != "" {
		section += "\n" + slackEscape(p.Body)
	}
	context := []string{"`" + string(p.Kind) + "`"}
	if p.Target != "" {
		context = append(context, slackEscape(p.Target))
	}
	context = append(context, "namespace "+slackEscape(ns), p.At.Format(time.RFC3339), "id "+slackEscape(p.IdempotencyKey))
	return json.Marshal(map[string]any{
		"text": text,
		"blocks": []any{
			map[string]any{"type": "section", "text": map[string]string{"type": "mrkdwn", "text": section}},
			map[string]any{"type": "context", "elements": []any{map[string]string{"type": "mrkdwn", "text": strings.Join(context, " · ")}}},
		},
	})
}

// slackEscape escapes the three characters Slack's mrkdwn gives a meaning
// to, so a reason cannot ping a channel or forge a link.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
