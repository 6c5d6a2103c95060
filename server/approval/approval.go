// Package approval tells people about held changes and reviews
// break-glass. The change path (package server: gate.go,
// changerequest.go) decides with the policy and keeps the change
// requests; this package hooks into it (Service.OnApproval) to enqueue a
// notification for every request, decision and apply — the requester
// hears the outcome on the channels — and, for every break-glass, to
// announce it and open a break_glass_review finding that another person
// must close with a note within a day; a leader job escalates the
// overdue ones.
package approval

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/finding"
	"github.com/switchyard-io/switchyard/server/notify"
)

// ReviewWithin is how long a break-glass may wait for its review before
// it escalates.
const ReviewWithin = 24 * time.Hour

// Service is the glue between the change path and the notification
// channels and findings.
type Service struct {
	svc *server.Service
}

// New registers the hook on svc and returns the service.
func New(svc *server.Service) *Service {
	s := &Service{svc: svc}
	svc.OnApproval(s.onEvent)
	return s
}

// Notification kind of each approval event.
var kinds = map[string]notify.Kind{
	server.EventRequested:  notify.RequestCreated,
	server.EventUpdated:    notify.RequestUpdated,
	server.EventApproved:   notify.RequestApproved,
	server.EventDenied:     notify.RequestDenied,
	server.EventApplied:    notify.RequestApplied,
	server.EventBreakGlass: notify.BreakGlass,
}

func (s *Service) onEvent(tx *gorm.DB, e server.ApprovalEvent) error {
	ev := notify.Event{Kind: kinds[e.Kind], App: e.App, Target: e.Target, At: e.At, Body: e.Reason,
		Data: map[string]any{"actor": e.Actor.Name, "rule": e.Rule, "reason": e.Reason}}
	if r := e.Request; r != nil {
		ev.Data["request"], ev.Data["requester"], ev.Data["state"] = r.ID, r.Author, r.State
		ev.Key = fmt.Sprintf("request/%d/%s@%d", r.ID, e.Kind, e.At.UnixNano())
	} else {
		ev.Key = fmt.Sprintf("break-glass/%s/%s@%d", e.Target, e.Actor.Name, e.At.UnixNano())
	}
	switch e.Kind {
	case server.EventRequested:
		ev.Title = fmt.Sprintf("%s asks for approval: %s on %s (request #%d)", e.Actor.Name, e.Request.Kind, e.Target, e.Request.ID)
	case server.EventUpdated:
		ev.Title = fmt.Sprintf("%s changed request #%d (%s); its approvals were cleared", e.Actor.Name, e.Request.ID, e.Target)
	case server.EventApproved:
		ev.Title = fmt.Sprintf("@%s: %s approved your request #%d (%s on %s)", e.Request.Author, e.Actor.Name, e.Request.ID, e.Request.Kind, e.Target)
	case server.EventDenied:
		ev.Title = fmt.Sprintf("@%s: %s denied your request #%d (%s on %s)", e.Request.Author, e.Actor.Name, e.Request.ID, e.Request.Kind, e.Target)
	case server.EventApplied:
		ev.Title = fmt.Sprintf("@%s: %s applied request #%d (%s on %s)", e.Request.Author, e.Actor.Name, e.Request.ID, e.Request.Kind, e.Target)
	case server.EventBreakGlass:
		ev.Title = fmt.Sprintf("BREAK-GLASS: %s applied %s on %s without approval", e.Actor.Name, e.Rule, e.Target)
		if err := notify.Enqueue(tx, ev); err != nil {
			return err
		}
		_, err := finding.Open(tx, finding.Spec{
			Kind: finding.BreakGlassReview, Target: reviewTarget(e), App: e.App, Severity: finding.Warning,
			Summary: fmt.Sprintf("Review the break-glass of %s: %s on %s", e.Actor.Name, e.Rule, e.Target),
			Detail:  "Reason given: " + e.Reason + ". Another person must close this review with a note within 24 h.",
		}, e.At)
		return err
	default:
		return fmt.Errorf("approval: unknown event %q", e.Kind)
	}
	return notify.Enqueue(tx, ev)
}

// reviewTarget names the review of one break-glass; its second segment is
// the actor, who may not close it.
func reviewTarget(e server.ApprovalEvent) string {
	return fmt.Sprintf("break-glass/%s/%s@%d", e.Actor.Name, e.Target, e.At.Unix())
}

func reviewedActor(target string) string {
	rest, _ := strings.CutPrefix(target, "break-glass/")
	actor, _, _ := strings.Cut(rest, "/")
	return actor
}

// Review is the note that closes a break-glass review.
type Review struct {
	Note string `json:"note"`
}

// CloseReview closes the break_glass_review finding id with a note; the
// person who broke the glass cannot close their own review. Whoever may
// change the app may review.
func (s *Service) CloseReview(ctx context.Context, a server.Actor, id int64, r Review) error {
	var f finding.Finding
	err := s.svc.DB().WithContext(ctx).Where("id = ? AND kind = ?", id, finding.BreakGlassReview).Take(&f).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return fmt.Errorf("%w: break-glass review %d", server.ErrNotFound, id)
	case err != nil:
		return fmt.Errorf("%w: %w", server.ErrUnavailable, err)
	}
	note := strings.TrimSpace(r.Note)
	return s.svc.Commit(ctx, server.Audited{
		Actor: a, Action: audit.ReviewClose, Reason: note, App: f.App,
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			switch {
			case !a.Person():
				return "", nil, nil, fmt.Errorf("%w: a person reviews a break-glass", server.ErrForbidden)
			case reviewedActor(f.Target) == a.Name:
				return "", nil, nil, fmt.Errorf("%w: you broke the glass; another person must review it", server.ErrForbidden)
			}
			ok, err := finding.Resolve(tx, finding.BreakGlassReview, f.Target, "reviewed by "+a.Name+": "+note, s.svc.Now())
			if err != nil {
				return "", nil, nil, err
			}
			if !ok {
				return "", nil, nil, server.Conflictf("break-glass review %d was closed already", id)
			}
			return f.Target, nil, map[string]any{"finding": id, "reviewed_by": a.Name, "note": note}, nil
		},
	})
}

// Job escalates the break-glass reviews left open past ReviewWithin:
// the finding turns critical and every channel hears it once.
type Job struct {
	s     *Service
	every time.Duration
}

// Job returns the escalation job (a leader job).
func (s *Service) Job(every time.Duration) *Job {
	if every <= 0 {
		every = time.Minute
	}
	return &Job{s: s, every: every}
}

// Name names the job.
func (j *Job) Name() string { return "break-glass-review" }

// Every is the job's period.
func (j *Job) Every() time.Duration { return j.every }

// Step escalates the overdue reviews at now.
func (j *Job) Step(ctx context.Context, t server.Term, now time.Time) error {
	_, err := j.s.svc.InTerm(ctx, t, func(jt *server.JobTx) error {
		tx := jt.DB()
		var overdue []finding.Finding
		if err := tx.Where("kind = ? AND resolved_at IS NULL AND since < ? AND severity <> ?", finding.BreakGlassReview, now.Add(-ReviewWithin), finding.Critical).
			Find(&overdue).Error; err != nil {
			return err
		}
		for _, f := range overdue {
			if _, err := finding.Open(tx, finding.Spec{Kind: f.Kind, Target: f.Target, App: f.App, Severity: finding.Critical,
				Summary: "OVERDUE: " + f.Summary, Detail: f.Detail}, now); err != nil {
				return err
			}
			if err := notify.Enqueue(tx, notify.Event{
				Key: fmt.Sprintf("finding/%d/escalated", f.ID), Kind: notify.BreakGlass, App: f.App, Target: f.Target, At: now,
				Title: "Nobody reviewed a break-glass within 24 h: " + f.Summary, Body: f.Detail,
				Data: map[string]any{"finding": f.ID, "since": f.Since.UTC()},
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}
