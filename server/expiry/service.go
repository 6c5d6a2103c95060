package expiry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/finding"
)

// Service is the expiry domain for the API and the web UI: renewing a
// switch, its expiry status (the findings have their own service); it also makes the expiry job
// and the hook that resolves a switch's expiry findings as soon as a
// person renews, turns off or deletes it.
type Service struct {
	svc      *server.Service
	cfg      Config
	findings *finding.Service
}

// New returns the expiry service on svc.
func New(svc *server.Service, cfg Config) *Service {
	cfg.defaults()
	return &Service{svc: svc, cfg: cfg, findings: finding.NewService(svc)}
}

// Findings returns the findings service, which the expiry domain's pages
// and API are mounted with.
func (s *Service) Findings() *finding.Service { return s.findings }

// Config returns the service's configuration.
func (s *Service) Config() Config { return s.cfg }

// Job returns the expiry job.
func (s *Service) Job() *Job { return &Job{s: s} }

// Renew confirms that switch app/name stays on: its expiry moves to now +
// max_on (server.Service.RenewSwitch), and the hook resolves its expiry
// findings in the same transaction.
func (s *Service) Renew(ctx context.Context, a server.Actor, app, name string, c server.Change) (*server.Switch, server.Receipt, error) {
	return s.svc.RenewSwitch(ctx, a, app, name, c)
}

// OnPersonChange runs inside the transaction of a person's change to a
// switch (server.Service.OnPersonChange): a renewal, turning the switch
// off or deleting it resolves its expiry findings at once, saying who,
// and ends the job's progress on that expiry.
func (s *Service) OnPersonChange(j *server.JobTx, c server.PersonChange) error {
	sw, err := j.Switch(c.App, c.Name)
	if err != nil && !errors.Is(err, server.ErrNotFound) {
		return err
	}
	var why string
	switch {
	case sw == nil:
		why = "deleted by " + c.Actor.Name
	case sw.State != wire.StateOn:
		why = "turned off by " + c.Actor.Name
	case c.Action == audit.SwitchRenew && sw.ExpiresAt != nil:
		why = "renewed by " + c.Actor.Name + " until " + sw.ExpiresAt.UTC().Format(time.RFC3339)
	default:
		return nil
	}
	if err := resolve(j.DB(), "switch/"+c.App+"/"+c.Name, why, c.At); err != nil {
		return err
	}
	return j.DB().Where("app = ? AND name = ?", c.App, c.Name).Delete(&stateRow{}).Error
}

// Status is a switch's expiry as the switch page and the Overview show it.
type Status struct {
	App, Name string
	On        bool
	OnFor     string // "30 days"
	ExpiresAt *time.Time
	Left      string // "3h 5m" until the expiry, when not yet expired
	Overdue   string // "2d 4h" since the expiry, when expired
	Policy    string
	MaxOn     string
	// Expired: on past its expiry; Soon: within its reminder lead.
	Expired, Soon bool
	// Findings are the switch's open findings, every kind.
	Findings []finding.Finding
}

// Banner is the switch's expiry line for people: "on for 30 days — confirm
// or turn off"; "" when there is nothing to confirm.
func (st *Status) Banner() string {
	switch {
	case !st.On || (!st.Expired && !st.Soon):
		return ""
	case st.Expired:
		return "on for " + st.OnFor + " — confirm or turn off"
	case st.Policy == server.ExpiryAutoOff:
		return "on for " + st.OnFor + " — turns off by itself in " + st.Left + " unless renewed"
	}
	return "on for " + st.OnFor + " — expires in " + st.Left + ": confirm or turn off"
}

// StatusOf returns sw's expiry status now.
func (s *Service) StatusOf(ctx context.Context, sw *server.Switch) (*Status, error) {
	now := s.svc.Now()
	st := &Status{App: sw.App, Name: sw.Name, On: sw.State == wire.StateOn, ExpiresAt: utc(sw.ExpiresAt), Policy: sw.ExpiryPolicy, MaxOn: sw.MaxOn}
	if st.On && sw.TurnedOnAt != nil {
		st.OnFor = OnFor(now.Sub(*sw.TurnedOnAt))
	}
	if st.On && st.ExpiresAt != nil {
		d, _ := server.ParseDuration(sw.MaxOn)
		st.Expired = !now.Before(*st.ExpiresAt)
		st.Soon = !st.Expired && s.cfg.RemindBefore > 0 && !now.Before(st.ExpiresAt.Add(-RemindLead(d, s.cfg)))
		st.Left = OnFor(max(st.ExpiresAt.Sub(now), 0))
		st.Overdue = OnFor(max(now.Sub(*st.ExpiresAt), 0))
	}
	list, err := finding.List(s.svc.DB().WithContext(ctx), finding.Filter{Target: sw.Target(), Open: true})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", server.ErrUnavailable, err)
	}
	st.Findings = list
	return st, nil
}

// Expired returns the switches that are on past their expiry, oldest
// expiry first, with their status (for the Overview).
func (s *Service) Expired(ctx context.Context) ([]*Status, error) {
	var list []server.Switch
	err := s.svc.DB().WithContext(ctx).Where("state = ? AND expires_at <= ?", wire.StateOn, s.svc.Now()).Order("expires_at").Limit(100).Find(&list).Error
	if err != nil {
		return nil, fmt.Errorf("%w: %w", server.ErrUnavailable, err)
	}
	out := make([]*Status, 0, len(list))
	for i := range list {
		st, err := s.StatusOf(ctx, &list[i])
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}
