package server

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// Service is the console's domain API: switches, limit rules, tokens and
// users, every change through the audited change path (change.go). It
// knows nothing about HTTP.
type Service struct {
	db  *gorm.DB
	pub *Publisher
	now func() time.Time
	// credentialsChanged run inside the transaction that changes a user's
	// password, role or disabled flag (see OnCredentialsChange).
	credentialsChanged []func(tx *gorm.DB, userID int64) error
	// personChanged run inside the transaction of a person's switch change
	// (see OnPersonChange).
	personChanged []func(j *JobTx, c PersonChange) error
	// approvalHooks run inside the transaction of every approval event
	// (see OnApproval).
	approvalHooks []func(tx *gorm.DB, e ApprovalEvent) error
	// appliers apply the job domains' change requests (OnApplyPending).
	appliers map[string]func(ctx context.Context, a Actor, p Pending) error
	// selfApproval lets the author of a change request approve it.
	selfApproval bool
	// requestTTL is how long a change request may wait.
	requestTTL time.Duration
	// chainOnly appends audit events without the Merkle tree (see
	// WithoutAuditTree).
	chainOnly bool
}

// ServiceOption changes a Service.
type ServiceOption func(*Service)

// WithClock sets the clock of the service's bookkeeping (updated_at,
// expires_at, audit times): tests and leader jobs move time by hand.
func WithClock(now func() time.Time) ServiceOption {
	return func(s *Service) { s.now = func() time.Time { return now().UTC() } }
}

// WithoutAuditTree makes changes append their audit events to the hash
// chain only, not to the Merkle tree: the baseline BenchmarkFlip measures
// the tree's cost against. The next append with the tree catches it up.
func WithoutAuditTree() ServiceOption { return func(s *Service) { s.chainOnly = true } }

// WithSelfApproval lets the author of a change request approve it (off by
// default: another person must).
func WithSelfApproval(allowed bool) ServiceOption {
	return func(s *Service) { s.selfApproval = allowed }
}

// WithRequestTTL sets how long a change request may wait to be applied
// (default DefaultRequestTTL).
func WithRequestTTL(d time.Duration) ServiceOption {
	return func(s *Service) {
		if d > 0 {
			s.requestTTL = d
		}
	}
}

// NewService returns a service on db publishing through pub (nil: changes
// stay in the outbox for another console's publisher).
func NewService(db *gorm.DB, pub *Publisher, opts ...ServiceOption) *Service {
	s := &Service{db: db, pub: pub, now: func() time.Time { return time.Now().UTC() }, requestTTL: DefaultRequestTTL}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Now is the service's clock.
func (s *Service) Now() time.Time { return s.now() }

// DB returns the underlying database handle (for health checks).
func (s *Service) DB() *gorm.DB { return s.db }

// OnCredentialsChange registers fn to run inside every transaction that
// changes a user's password, role or disabled flag, so the owner of the
// user's sessions can end them atomically with the change. Register before
// serving; fn's error aborts the change.
func (s *Service) OnCredentialsChange(fn func(tx *gorm.DB, userID int64) error) {
	s.credentialsChanged = append(s.credentialsChanged, fn)
}
