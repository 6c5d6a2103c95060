// Package notify tells people what the leader jobs did: it records events
// in the transaction of the change that caused them (Enqueue), and the
// leader's notification job delivers them to the configured channels —
// signed webhooks, JSON or Slack-compatible — with retries and a delivery
// log. A failing channel never holds up the job that raised the event.
package notify

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
)

// Kind names an event; channels filter on it.
type Kind string

// The events the jobs raise.
const (
	TriggerFired     Kind = "trigger.fired"
	TriggerRecovered Kind = "trigger.recovered"
	TriggerLocked    Kind = "trigger.locked"
	TriggerProposes  Kind = "trigger.proposes_recovery"
	DrillPassed      Kind = "drill.passed"
	DrillFailed      Kind = "drill.failed"
	DrillInterrupted Kind = "drill.interrupted"
	RolloutPaused    Kind = "rollout.paused"
	RolloutReverted  Kind = "rollout.reverted"
	RolloutDone      Kind = "rollout.done"
	ExpiryReminder   Kind = "expiry.reminder"
	ExpiryEscalation Kind = "expiry.escalation"
	ExpiryTurnedOff  Kind = "expiry.turned_off"
	FindingOpened    Kind = "finding.opened"
	FindingResolved  Kind = "finding.resolved"
	ChannelTest      Kind = "channel.test"
	// SignInLocal: someone signed in with a password while single
	// sign-on is configured (break-glass).
	SignInLocal Kind = "signin.local"
	// Change requests: made, edited (approvals cleared), approved, denied,
	// applied; the requester is named in the title and data.
	RequestCreated  Kind = "request.created"
	RequestUpdated  Kind = "request.updated"
	RequestApproved Kind = "request.approved"
	RequestDenied   Kind = "request.denied"
	RequestApplied  Kind = "request.applied"
	// BreakGlass: a held change applied without approval, and a review of
	// one left open too long.
	BreakGlass Kind = "break_glass"
	// AuditCheckpoint carries each signed checkpoint of the audit log, so
	// receivers keep copies the console cannot take back.
	AuditCheckpoint Kind = "audit.checkpoint"
)

// Kinds lists every event kind.
var Kinds = []Kind{
	TriggerFired, TriggerRecovered, TriggerLocked, TriggerProposes,
	DrillPassed, DrillFailed, DrillInterrupted,
	RolloutPaused, RolloutReverted, RolloutDone,
	ExpiryReminder, ExpiryEscalation, ExpiryTurnedOff,
	FindingOpened, FindingResolved, ChannelTest, AuditCheckpoint, SignInLocal,
	RequestCreated, RequestUpdated, RequestApproved, RequestDenied, RequestApplied, BreakGlass,
}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return slices.Contains(Kinds, k) }

// Event is something that happened that people may need to hear about.
type Event struct {
	// Key makes the event idempotent: enqueuing the same key twice records
	// it once, and receivers get it in the payload to drop duplicates.
	// Build it from the cause: "trigger/checkout/cpu-high#fired@1733050000".
	Key    string
	Kind   Kind
	App    string // "" for events about no app
	Target string // "switch/checkout/recommend", "drill/checkout/reco#17"
	// Title is one line for people; Body may say more.
	Title string
	Body  string
	// Data carries the details (values, thresholds, verdicts) as JSON.
	Data map[string]any
	At   time.Time
}

// row is an event as stored.
type row struct {
	ID        int64 `gorm:"primaryKey"`
	EventKey  string
	Kind      string
	App       string
	Target    string
	Title     string
	Body      string
	Data      string
	CreatedAt time.Time
	// DispatchedAt is when the delivery job made the event's deliveries.
	DispatchedAt *time.Time
}

func (row) TableName() string { return "notifications" }

// Enqueue records e inside tx, the transaction of the change that caused
// it: the event exists exactly when its cause committed, and the leader's
// notification job delivers it. An event whose key was enqueued before is
// not recorded again.
func Enqueue(tx *gorm.DB, e Event) error {
	if e.Key == "" || !e.Kind.Valid() || e.Title == "" {
		return fmt.Errorf("notify: event needs a key, a known kind and a title: %+v", e)
	}
	data, err := json.Marshal(e.Data)
	if err != nil {
		return fmt.Errorf("notify: event data: %w", err)
	}
	if e.Data == nil {
		data = []byte("{}")
	}
	var n int64
	if err := tx.Model(&row{}).Where("event_key = ?", e.Key).Count(&n).Error; err != nil || n > 0 {
		return err
	}
	return tx.Create(&row{
		EventKey: e.Key, Kind: string(e.Kind), App: e.App, Target: e.Target,
		Title: e.Title, Body: e.Body, Data: string(data), CreatedAt: e.At.UTC(),
	}).Error
}
