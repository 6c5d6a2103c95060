package notify

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/egress"
)

// Formats of a channel's requests.
const (
	// FormatJSON posts the event as a Payload.
	FormatJSON = "json"
	// FormatSlack posts a Slack-compatible message: {"text", "blocks"}.
	FormatSlack = "slack"
)

// AllKinds in a channel's events matches every kind, including kinds added
// in later versions.
const AllKinds = "*"

// Limits of a channel's fields.
const (
	minSecretLen = 16
	maxSecretLen = 512
	maxURLLen    = 2000
)

// Channel is a webhook the delivery job sends events to. Its secret signs
// every request and is never shown again once set.
type Channel struct {
	server.Record
	Name        string
	URL         string
	Secret      string
	SecretSetAt time.Time
	Events      string // comma-separated kinds, or AllKinds
	Apps        string // comma-separated apps; "" is every app
	Format      string
}

// TableName pins the table name.
func (Channel) TableName() string { return "channels" }

// Target is how the audit log names the channel.
func (c *Channel) Target() string { return "channel/" + c.Name }

// Kinds returns the channel's event filter.
func (c *Channel) Kinds() []string { return split(c.Events) }

// AppList returns the apps the channel is for (none: every app).
func (c *Channel) AppList() []string { return split(c.Apps) }

// Wants reports whether an event of kind about app goes to the channel.
// Events about no app pass every app filter.
func (c *Channel) Wants(kind Kind, app string) bool {
	kinds := c.Kinds()
	if !slices.Contains(kinds, AllKinds) && !slices.Contains(kinds, string(kind)) {
		return false
	}
	apps := c.AppList()
	return app == "" || len(apps) == 0 || slices.Contains(apps, app)
}

// ChannelView is a channel as the API shows it to admins: everything but
// the secret, of which only the time it was set shows.
type ChannelView struct {
	Name        string    `json:"name"`
	URL         string    `json:"url"`
	Events      []string  `json:"events"`
	Apps        []string  `json:"apps"`
	Format      string    `json:"format"`
	SecretSetAt time.Time `json:"secret_set_at"`
	Version     int64     `json:"version"`
	Reason      string    `json:"reason"`
	UpdatedBy   string    `json:"updated_by"`
	UpdatedAt   time.Time `json:"updated_at"`
	CreatedAt   time.Time `json:"created_at"`
}

// View returns the API representation.
func (c *Channel) View() ChannelView {
	return ChannelView{
		Name: c.Name, URL: c.URL, Events: c.Kinds(), Apps: c.AppList(), Format: c.Format,
		SecretSetAt: c.SecretSetAt.UTC(), Version: c.Version, Reason: c.Reason,
		UpdatedBy: c.UpdatedBy, UpdatedAt: c.UpdatedAt.UTC(), CreatedAt: c.CreatedAt.UTC(),
	}
}

// auditView is the channel as its audit events record it. Viewers read the
// audit log, and a webhook URL often carries a token of its own (Slack's
// do), so only the URL's scheme and host are kept.
func (c *Channel) auditView() ChannelView {
	v := c.View()
	v.URL = RedactURL(c.URL)
	return v
}

// RedactURL keeps a URL's scheme and host: "https://hooks.slack.com/…".
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "…"
	}
	out := u.Scheme + "://" + u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		out += "/…"
	}
	return out
}

// ChannelInput creates a channel.
type ChannelInput struct {
	Name   string   `json:"name"`
	URL    string   `json:"url"`
	Secret string   `json:"secret"`
	Events []string `json:"events"`
	Apps   []string `json:"apps"`
	Format string   `json:"format"`
	Reason string   `json:"reason"`
}

// ChannelPatch changes some fields of a channel. Its JSON form is an
// RFC 7396 merge patch over the channel as the API shows it
// (server.Patch); Go callers may set the typed fields instead, each
// non-nil one a member of the patch. A new secret replaces the old one at
// once.
type ChannelPatch struct {
	Version *int64    `json:"version"`
	Reason  string    `json:"reason"`
	URL     *string   `json:"url"`
	Secret  *string   `json:"secret"`
	Events  *[]string `json:"events"`
	Apps    *[]string `json:"apps"`
	Format  *string   `json:"format"`

	merge json.RawMessage // the merge patch a JSON body gave
}

// UnmarshalJSON takes a merge patch.
func (p *ChannelPatch) UnmarshalJSON(b []byte) error {
	var mp server.Patch
	if err := json.Unmarshal(b, &mp); err != nil {
		return err
	}
	*p = ChannelPatch{Version: mp.Version, Reason: mp.Reason, merge: mp.Fields}
	return nil
}

// patch is the merge patch p stands for.
func (p *ChannelPatch) patch() server.Patch {
	if p.merge != nil {
		return server.Patch{Fields: p.merge}
	}
	return server.PatchOf(map[string]any{"url": p.URL, "secret": p.Secret, "events": p.Events, "apps": p.Apps, "format": p.Format})
}

// HiddenSecret is how a client that read a channel may send its secret
// back: the stored secret stays.
const HiddenSecret = "(hidden)"

// apply merges the patch over c; now is when a new secret was set. A
// secret of HiddenSecret keeps the stored one. It returns the members
// the merged channel cannot take.
func (p *ChannelPatch) apply(c *Channel, now time.Time) server.FieldErrors {
	mp := p.patch()
	v := c.View()
	var in ChannelInput
	errs := mp.Merge(ChannelInput{URL: v.URL, Events: v.Events, Apps: v.Apps, Format: v.Format}, &in)
	if mp.Names("name") {
		errs.Add("name", "cannot be changed; create a channel with the new name and delete this one")
	}
	c.URL, c.Events, c.Apps, c.Format = strings.TrimSpace(in.URL), join(in.Events), join(in.Apps), strings.TrimSpace(in.Format)
	if mp.Names("secret") && in.Secret != HiddenSecret {
		c.Secret, c.SecretSetAt = in.Secret, now
	}
	return errs
}

// validate checks every field of c (and the change's reason); the error
// names each bad field. A URL whose literal host the egress guard refuses
// is refused here; a name is checked when it is dialled.
func (c *Channel) validate(reason string, g *egress.Guard) error {
	var v server.FieldErrors
	if !wire.ValidName(c.Name) {
		v.Add("name", "must match "+wire.NamePattern.String())
	}
	if u, err := url.Parse(c.URL); c.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.Add("url", "must be an http:// or https:// URL with a host")
	} else if len(c.URL) > maxURLLen || !wire.Printable(c.URL) {
		v.Add("url", "must be at most 2000 printable characters")
	} else if err := g.CheckURL(c.URL); err != nil {
		v.Add("url", err.Error())
	}
	switch {
	case c.Secret == "":
		v.Add("secret", "is required: every delivery is signed with it (HMAC-SHA256)")
	case len(c.Secret) < minSecretLen || len(c.Secret) > maxSecretLen:
		v.Add("secret", "must be 16 to 512 characters")
	case !wire.Printable(c.Secret):
		v.Add("secret", "must not contain control characters")
	}
	kinds := c.Kinds()
	if len(kinds) == 0 {
		v.Add("events", `is required: the event kinds to send, or "*" for all`)
	}
	for _, k := range kinds {
		if k != AllKinds && !Kind(k).Valid() {
			v.Add("events", `has an unknown event "`+k+`": use "*" or any of `+strings.Join(kindNames(), ", "))
			break
		}
	}
	for _, a := range c.AppList() {
		if !wire.ValidApp(a) {
			v.Add("apps", `has an invalid app "`+a+`": apps must match `+wire.NamePattern.String())
			break
		}
	}
	if c.Format != FormatJSON && c.Format != FormatSlack {
		v.Add("format", `must be "json" or "slack"`)
	}
	if strings.TrimSpace(reason) == "" {
		v.Add("reason", "is required: say why you make this change")
	}
	return v.Err()
}

func kindNames() []string {
	out := make([]string, len(Kinds))
	for i, k := range Kinds {
		out[i] = string(k)
	}
	return out
}

// split reads a stored comma-separated list.
func split(s string) []string {
	out := []string{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// join stores a list, trimmed and without duplicates, comma-separated.
func join(list []string) string {
	var out []string
	for _, s := range list {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, ",")
}

// invalid is a validation error of one field.
func invalid(field, msg string) error {
	var f server.FieldErrors
	f.Add(field, msg)
	return f.Err()
}
