package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/egress"
	"github.com/switchyard-io/switchyard/server/seal"
)

// Config tunes deliveries; zero fields take the defaults.
type Config struct {
	// Namespace goes into every payload, so one receiver can serve several.
	Namespace string
	// Every is the delivery job's period (default 1s).
	Every time.Duration
	// Timeout bounds one request (default 5s): a receiver that never
	// answers holds one of the job's slots this long, nothing more.
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between attempts (default
	// 5s, doubling per attempt, up to 5m); RetryFor is how long a delivery
	// is retried before it is given up as failed (default 1h).
	MinBackoff, MaxBackoff, RetryFor time.Duration
	// Concurrency bounds the requests in flight (default 8), PerChannel
	// those to one channel (default 2): a channel that hangs cannot take
	// every slot.
	Concurrency, PerChannel int
	Logger                  *slog.Logger
	// Keys seal the channels' secrets at rest (nil: stored as given).
	Keys *seal.Keyring
	// Egress guards the deliveries: every connection is checked where it
	// is dialled (nil: egress.Strict, no allowlist).
	Egress *egress.Guard
}

func (c *Config) defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&c.Every, time.Second)
	set(&c.Timeout, 5*time.Second)
	set(&c.MinBackoff, 5*time.Second)
	set(&c.MaxBackoff, 5*time.Minute)
	set(&c.RetryFor, time.Hour)
	if c.Concurrency <= 0 {
		c.Concurrency = 8
	}
	if c.PerChannel <= 0 {
		c.PerChannel = 2
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Egress == nil {
		c.Egress = egress.Strict()
	}
}

func (c *Config) retry() retryPolicy {
	return retryPolicy{Min: c.MinBackoff, Max: c.MaxBackoff, For: c.RetryFor}
}

// lease is how long past its start an attempt counts as under way: a
// console that dies mid-request leaves its delivery "sending", and the
// next leader retries it once the lease has passed.
func (c *Config) lease() time.Duration { return c.Timeout + 10*time.Second }

// Service manages the notification channels (admins only, every change
// audited) and their delivery log, and makes the delivery job.
type Service struct {
	svc    *server.Service
	db     *gorm.DB
	cfg    Config
	client *http.Client
}

// New returns the channels service on svc's database.
func New(svc *server.Service, cfg Config) *Service {
	cfg.defaults()
	return &Service{svc: svc, db: svc.DB(), cfg: cfg, client: cfg.Egress.Client(5*time.Second, false)}
}

func mayManage(a server.Actor) error {
	if a.Role != server.RoleAdmin {
		return fmt.Errorf("%w: only admins manage notification channels", server.ErrForbidden)
	}
	return nil
}

// ListChannels returns one page of the channels by name and the cursor
// of the next page (server.Page{}: every channel).
func (s *Service) ListChannels(ctx context.Context, pg server.Page) ([]Channel, string, error) {
	var out []Channel
	if err := pg.ByName(s.db.WithContext(ctx), "name").Find(&out).Error; err != nil {
		return nil, "", fmt.Errorf("%w: %w", server.ErrUnavailable, err)
	}
	out, next := server.Cut(out, pg, func(c *Channel) string { return c.Name })
	return out, next, nil
}

// GetChannel returns one channel.
func (s *Service) GetChannel(ctx context.Context, name string) (*Channel, error) {
	return loadChannel(s.db.WithContext(ctx), name)
}

func loadChannel(tx *gorm.DB, name string) (*Channel, error) {
	var ch Channel
	err := tx.Where("name = ?", name).Take(&ch).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return nil, fmt.Errorf("%w: channel %s", server.ErrNotFound, name)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", server.ErrUnavailable, err)
	}
	return &ch, nil
}

// stamp sets the bookkeeping of a channel written by a at version v.
func stamp(ch *Channel, a server.Actor, reason string, v int64, now time.Time) {
	ch.Version, ch.Reason, ch.UpdatedBy, ch.UpdatedAt = v, strings.TrimSpace(reason), a.Name, now
}

// CreateChannel adds a channel (admins only). Every field is checked
// before anything is written; the error names each bad one.
func (s *Service) CreateChannel(ctx context.Context, a server.Actor, in ChannelInput) (*Channel, error) {
	if err := mayManage(a); err != nil {
		return nil, err
	}
	now := s.svc.Now()
	ch := &Channel{
		Name: strings.TrimSpace(in.Name), URL: strings.TrimSpace(in.URL), Secret: in.Secret, SecretSetAt: now,
		Events: join(in.Events), Apps: join(in.Apps), Format: strings.TrimSpace(in.Format),
	}
	if ch.Format == "" {
		ch.Format = FormatJSON
	}
	if err := ch.validate(in.Reason, s.cfg.Egress); err != nil {
		return nil, err
	}
	ch.Secret = s.cfg.Keys.Seal(ch.Secret)
	err := s.svc.Commit(ctx, server.Audited{Actor: a, Action: audit.ChannelCreate, Reason: in.Reason,
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			stamp(ch, a, in.Reason, 1, now)
			ch.CreatedAt = now
			if err := tx.Create(ch).Error; err != nil {
				return "", nil, nil, err
			}
			return ch.Target(), nil, ch.auditView(), nil
		}})
	if errors.Is(err, server.ErrAlreadyExists) {
		return nil, &server.ExistsError{Field: "name", Name: ch.Name}
	}
	if err != nil {
		return nil, err
	}
	return ch, nil
}

// UpdateChannel changes a channel (admins only), guarded by its version.
func (s *Service) UpdateChannel(ctx context.Context, a server.Actor, name string, p ChannelPatch) (*Channel, error) {
	if err := mayManage(a); err != nil {
		return nil, err
	}
	var out *Channel
	err := s.svc.Commit(ctx, server.Audited{Actor: a, Action: audit.ChannelUpdate, Reason: p.Reason,
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			cur, err := loadChannel(tx, name)
			if err != nil {
				return "", nil, nil, err
			}
			now := s.svc.Now()
			next := *cur
			if next.Secret, err = s.cfg.Keys.Open(cur.Secret); err != nil {
				return "", nil, nil, fmt.Errorf("%w: channel %s: %w", server.ErrUnavailable, name, err)
			}
			errs := p.apply(&next, now)
			errs.AddErr("", next.validate(p.Reason, s.cfg.Egress))
			if err := errs.Err(); err != nil {
				return "", nil, nil, err
			}
			next.Secret = s.cfg.Keys.Seal(next.Secret)
			if err := server.CheckVersion(p.Version, cur.Version); err != nil {
				return "", nil, nil, err
			}
			stamp(&next, a, p.Reason, cur.Version+1, now)
			if err := server.UpdateVersioned(tx, &Channel{}, server.Versioned{ID: cur.ID, Version: cur.Version, What: cur.Target(), Sent: p.Version}, &next); err != nil {
				return "", nil, nil, err
			}
			out = &next
			return next.Target(), cur.auditView(), next.auditView(), nil
		}})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteChannel removes a channel and its delivery log (admins only).
// Deliveries under way finish against nothing.
func (s *Service) DeleteChannel(ctx context.Context, a server.Actor, name string, c server.Change) error {
	if err := mayManage(a); err != nil {
		return err
	}
	return s.svc.Commit(ctx, server.Audited{Actor: a, Action: audit.ChannelDelete, Reason: c.Reason,
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			cur, err := loadChannel(tx, name)
			if err != nil {
				return "", nil, nil, err
			}
			if err := server.CheckVersion(c.Version, cur.Version); err != nil {
				return "", nil, nil, err
			}
			// Explicitly: SQLite does not enforce the foreign key's cascade.
			if err := tx.Where("channel_id = ?", cur.ID).Delete(&delivery{}).Error; err != nil {
				return "", nil, nil, err
			}
			if err := server.DeleteVersioned(tx, &Channel{}, server.Versioned{ID: cur.ID, Version: cur.Version, What: cur.Target(), Sent: c.Version}); err != nil {
				return "", nil, nil, err
			}
			return cur.Target(), cur.auditView(), nil, nil
		}})
}

// DeliveryView is one entry of the delivery log.
type DeliveryView struct {
	ID            int64      `json:"id"`
	Channel       string     `json:"channel"`
	EventKey      string     `json:"event_key"`
	Kind          string     `json:"kind"`
	Title         string     `json:"title"`
	Target        string     `json:"target,omitempty"`
	Status        string     `json:"status"`
	Attempts      int        `json:"attempts"`
	ResponseCode  int        `json:"response_code,omitempty"`
	Error         string     `json:"error,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	LastAttemptAt *time.Time `json:"last_attempt_at,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	FinishedAt    *time.Time `json:"finished_at,omitempty"`
}

// DeliveryFilter selects entries of the delivery log.
type DeliveryFilter struct {
	Channel     string // a channel's name; "" every channel
	Status      string // one of the Status constants; "" every status
	server.Page        // by id, newest first
}

// Statuses lists the delivery states.
var Statuses = []string{StatusPending, StatusSending, StatusDelivered, StatusFailed}

// Deliveries returns one page of the entries of the delivery log that
// match f, newest first, and the cursor of the next page.
func (s *Service) Deliveries(ctx context.Context, f DeliveryFilter) ([]DeliveryView, string, error) {
	q := s.db.WithContext(ctx).Table("deliveries AS d").
		Select("d.id, c.name AS channel, n.event_key, n.kind, n.title, n.target, d.status, d.attempts, d.response_code, d.error, d.created_at, d.last_attempt_at, d.next_attempt_at, d.finished_at").
		Joins("JOIN channels c ON c.id = d.channel_id").Joins("JOIN notifications n ON n.id = d.notification_id")
	if f.Channel != "" {
		q = q.Where("c.name = ?", f.Channel)
	}
	if f.Status != "" {
		q = q.Where("d.status = ?", f.Status)
	}
	q, err := f.Newest(q, "d.id")
	if err != nil {
		return nil, "", err
	}
	var out []DeliveryView
	if err := q.Scan(&out).Error; err != nil {
		return nil, "", fmt.Errorf("%w: %w", server.ErrUnavailable, err)
	}
	out, next := server.Cut(out, f.Page, func(d *DeliveryView) string { return server.IDKey(d.ID) })
	for i := range out {
		d := &out[i]
		d.CreatedAt = d.CreatedAt.UTC()
		for _, t := range []**time.Time{&d.LastAttemptAt, &d.NextAttemptAt, &d.FinishedAt} {
			if *t != nil {
				u := (*t).UTC()
				*t = &u
			}
		}
	}
	return out, next, nil
}

// SendTest sends a channel.test event to channel name now, from this
// console, once (no retries), and returns its entry in the delivery log:
// what an admin needs to know whether the receiver accepts our requests.
// It takes a reason (and optionally the channel's version) and is audited
// like every other write.
func (s *Service) SendTest(ctx context.Context, a server.Actor, name string, c server.Change) (DeliveryView, error) {
	if err := mayManage(a); err != nil {
		return DeliveryView{}, err
	}
	if strings.TrimSpace(c.Reason) == "" {
		return DeliveryView{}, &server.ValidationError{Fields: []*server.FieldError{{Field: "reason", Msg: "is required: say why you make this change"}}}
	}
	ch, err := s.GetChannel(ctx, name)
	if err != nil {
		return DeliveryView{}, err
	}
	if err := server.CheckVersion(c.Version, ch.Version); err != nil {
		return DeliveryView{}, err
	}
	now := s.svc.Now()
	at := attempt{ch: *ch, ev: row{
		EventKey: "channel/" + ch.Name + "/test@" + strconv.FormatInt(now.UnixNano(), 10), Kind: string(ChannelTest),
		Title: "Test from Switchyard: channel " + ch.Name + " works",
		Body:  "Sent by " + a.Name + " with the channel's secret; a receiver that verified the signature accepts the events it subscribes to.",
		Data:  `{"channel":"` + ch.Name + `"}`, CreatedAt: now, DispatchedAt: &now,
	}}
	err = s.svc.Commit(ctx, server.Audited{Actor: a, Action: audit.ChannelTest, Reason: c.Reason,
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			if err := tx.Create(&at.ev).Error; err != nil {
				return "", nil, nil, err
			}
			lease := now.Add(s.cfg.lease())
			at.d = delivery{NotificationID: at.ev.ID, ChannelID: ch.ID, Status: StatusSending, Attempts: 1,
				LastAttemptAt: &now, NextAttemptAt: &lease, CreatedAt: now}
			if err := tx.Create(&at.d).Error; err != nil {
				return "", nil, nil, err
			}
			return ch.Target(), nil, map[string]any{"test_delivery": at.d.ID, "url": RedactURL(ch.URL)}, nil
		}})
	if err != nil {
		return DeliveryView{}, err
	}
	res := s.send(ctx, at)
	// A test is tried once: the admin sees the answer now. Its outcome is
	// recorded even if the admin went away meanwhile, or the leader would
	// send it again once its lease passed.
	rec, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := finish(s.db.WithContext(rec), at, res, s.svc.Now(), retryPolicy{}); err != nil {
		return DeliveryView{}, fmt.Errorf("%w: %w", server.ErrUnavailable, err)
	}
	list, _, err := s.Deliveries(rec, DeliveryFilter{Page: server.Page{After: server.IDKey(at.d.ID + 1), Limit: 1}})
	if err != nil || len(list) == 0 || list[0].ID != at.d.ID {
		return DeliveryView{}, fmt.Errorf("%w: the test delivery is not in the log", server.ErrUnavailable)
	}
	return list[0], nil
}

// Reseal seals every channel secret under keys' first key (opening it with
// whichever key sealed it, or taking it as stored before sealing was on)
// and returns how many it changed. `console secrets rotate` runs it.
func Reseal(ctx context.Context, db *gorm.DB, keys *seal.Keyring) (int, error) {
	var list []Channel
	if err := db.WithContext(ctx).Find(&list).Error; err != nil {
		return 0, err
	}
	n := 0
	for _, ch := range list {
		out, changed, err := keys.Reseal(ch.Secret)
		if err != nil {
			return n, fmt.Errorf("channel %s: %w", ch.Name, err)
		}
		if !changed {
			continue
		}
		if err := db.WithContext(ctx).Model(&Channel{}).Where("id = ?", ch.ID).Update("secret", out).Error; err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
