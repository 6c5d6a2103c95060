package rollout

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
)

// row is a plan as stored in the rollouts table. The plan, its progress
// and the switch's state before it are JSON documents; version guards
// every update (the leader's steps, a person's actions and a person's
// change to the switch may race).
type row struct {
	ID          int64 `gorm:"primaryKey"`
	App         string
	SwitchName  string
	Direction   string
	State       string
	Plan        string
	BeforeState string
	// BaseVersion is the switch's version when the plan was created.
	BaseVersion int64
	Progress    string
	Version     int64
	CreatedBy   string
	Reason      string
	CreatedAt   time.Time `gorm:"autoCreateTime:false"`
	UpdatedAt   time.Time `gorm:"autoUpdateTime:false"`
	EndedAt     *time.Time
}

func (row) TableName() string { return "rollouts" }

// activeStates are the states of a plan still to finish (see Active).
var activeStates = []string{Pending, Running, Paused}

// run is a decoded row.
type run struct {
	row
	plan     Plan
	progress Progress
	before   server.SwitchState
	// adopted: the switch's version moved without changing what the plan
	// set (see adopt); the next save records it.
	adopted bool
}

// Cause names a plan in the audit log, as the cause of its changes and
// the target of its own events: "rollout/<app>/<switch>#<id>".
func Cause(app, name string, id int64) string { return fmt.Sprintf("rollout/%s/%s#%d", app, name, id) }

func (r *run) cause() string { return Cause(r.App, r.SwitchName, r.ID) }

func decode(r row) (*run, error) {
	out := &run{row: r}
	if err := json.Unmarshal([]byte(r.Plan), &out.plan); err != nil {
		return nil, fmt.Errorf("rollout: plan #%d: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(r.Progress), &out.progress); err != nil {
		return nil, fmt.Errorf("rollout: progress of plan #%d: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(r.BeforeState), &out.before); err != nil {
		return nil, fmt.Errorf("rollout: state before plan #%d: %w", r.ID, err)
	}
	if len(out.plan.Steps) == 0 || out.progress.Step >= len(out.plan.Steps) {
		return nil, fmt.Errorf("rollout: plan #%d has %d steps and is at step %d", r.ID, len(out.plan.Steps), out.progress.Step)
	}
	for _, rec := range out.progress.Steps {
		if rec.Index < 0 || rec.Index >= len(out.plan.Steps) {
			return nil, fmt.Errorf("rollout: plan #%d has a record of step %d of %d", r.ID, rec.Index, len(out.plan.Steps))
		}
	}
	out.plan.Reason = r.Reason
	out.plan.normalize() // plans stored before the shared on_no_data words
	return out, nil
}

// errStale means the plan's row changed since it was read: the step or
// action that read it must not write over it.
var errStale = errors.New("rollout: the plan changed meanwhile")

// load reads plan id of app.
func load(tx *gorm.DB, app string, id int64) (*run, error) {
	var r row
	err := tx.Where("app = ? AND id = ?", app, id).Take(&r).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return nil, fmt.Errorf("%w: staged rollout #%d of app %s", server.ErrNotFound, id, app)
	case err != nil:
		return nil, err
	}
	return decode(r)
}

// activeFor reads the active plan of switch app/name; nil when none.
func activeFor(tx *gorm.DB, app, name string) (*run, error) {
	var rows []row
	if err := tx.Where("app = ? AND switch_name = ? AND state IN ?", app, name, activeStates).Limit(1).Find(&rows).Error; err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, nil
	}
	return decode(rows[0])
}

// save writes r's state and progress if the row still has the version r
// was read at, and moves r to the next version; errStale when it has not.
func save(tx *gorm.DB, r *run, now time.Time) error {
	b, err := json.Marshal(r.progress)
	if err != nil {
		return err
	}
	now = now.UTC()
	res := tx.Model(&row{}).Where("id = ? AND version = ?", r.ID, r.Version).Updates(map[string]any{
		"state": r.State, "progress": string(b), "version": r.Version + 1, "updated_at": now, "ended_at": r.EndedAt,
		"base_version": r.BaseVersion,
	})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return errStale
	}
	r.Progress, r.Version, r.UpdatedAt = string(b), r.Version+1, now
	return nil
}

// end moves r to a final state at now.
func (r *run) end(state string, now time.Time) {
	t := now.UTC()
	r.State, r.EndedAt = state, &t
	r.progress.Request = nil
}

// holds reports whether sw does what the plan last set: the current
// step's state and rollout or, before the first step, the state the plan
// found. Renewals and metadata edits keep this true; they bump the
// version only.
func (r *run) holds(sw *server.Switch) bool {
	if cur := r.progress.current(); cur != nil {
		if cur.Off {
			return sw.State == wire.StateOff
		}
		return sw.State == wire.StateOn && sameRollout(sw.Rollout(), cur.Rollout)
	}
	return sw.State == r.before.State && sameRollout(sw.Rollout(), r.before.Rollout)
}

// adopt makes version the one the plan expects of its switch.
func (r *run) adopt(version int64) {
	if cur := r.progress.current(); cur != nil {
		cur.Version = version
	} else {
		r.BaseVersion = version
	}
	r.adopted = true
}

// expectedVersion is the switch version the plan last set (or found when
// it was created): any other means someone changed the switch.
func (r *run) expectedVersion() int64 {
	if cur := r.progress.current(); cur != nil {
		return cur.Version
	}
	return r.BaseVersion
}

// summary is a plan as its audit events show it before and after.
type summary struct {
	State   string   `json:"state"`
	Step    int      `json:"step"` // 1-based; 0 before the first
	Of      int      `json:"of"`
	Target  string   `json:"target,omitempty"`
	Note    string   `json:"note,omitempty"`
	Request *Request `json:"request,omitempty"`
}

func (r *run) summary() summary {
	s := summary{State: r.State, Step: r.progress.Step + 1, Of: len(r.plan.Steps), Note: r.progress.Note, Request: r.progress.Request}
	if cur := r.progress.current(); cur != nil {
		s.Target = Describe(cur.Rollout, cur.Off)
	}
	return s
}

// View is a plan as the API and the pages show it.
type View struct {
	ID        int64  `json:"id"`
	App       string `json:"app"`
	Switch    string `json:"switch"`
	Cause     string `json:"cause"`
	Direction string `json:"direction"`
	State     string `json:"state"`
	Steps     []Step `json:"steps"`
	OnFailure string `json:"on_failure"`
	// Step is the index of the current step, -1 before the first.
	Step int `json:"step"`
	// History has a record per applied step, oldest first (a step applied
	// again after a pause has a second record).
	History []StepView `json:"history"`
	// Note says what the plan waits for or why it paused.
	Note    string   `json:"note,omitempty"`
	Request *Request `json:"request,omitempty"`
	// Live is the current step as the fleet model sees it now.
	Live *Live `json:"live,omitempty"`
	// Before is the switch's state before the plan: what a revert puts
	// back.
	Before    server.SwitchState `json:"before"`
	Version   int64              `json:"version"`
	CreatedBy string             `json:"created_by"`
	Reason    string             `json:"reason"`
	CreatedAt time.Time          `json:"created_at"`
	UpdatedAt time.Time          `json:"updated_at"`
	EndedAt   *time.Time         `json:"ended_at,omitempty"`
}

// StepView is one step's record with what people read off it.
type StepView struct {
	StepRecord
	// Target is the step's slice for people: "5 %", "100 % where
	// canary=true", "off".
	Target     string     `json:"target"`
	HoldEndsAt *time.Time `json:"hold_ends_at,omitempty"`
	// HoldLeft is what is left of the hold now ("" when it is not
	// running).
	HoldLeft string `json:"hold_left,omitempty"`
}

// Live is the current step's convergence now.
type Live struct {
	Synced    bool  `json:"synced"`
	Published bool  `json:"published"`
	Override  bool  `json:"override,omitempty"`
	Revision  int64 `json:"revision"`
	Applied   int   `json:"applied"`
	Targeted  int   `json:"targeted"`
	// Needed is how many must apply for the step to converge.
	Needed    int            `json:"needed"`
	Instances []LiveInstance `json:"instances,omitempty"`
}

// LiveInstance is one targeted instance.
type LiveInstance struct {
	ID      string `json:"instance_id"`
	Applied bool   `json:"applied"`
}

// Active reports whether the plan is still to finish.
func (v *View) Active() bool { return Active(v.State) }

// StepNumber is the current step, 1-based (0 before the first).
func (v *View) StepNumber() int { return v.Step + 1 }

// Current returns the current step's record, nil before the first.
func (v *View) Current() *StepView {
	if len(v.History) == 0 || v.Step < 0 {
		return nil
	}
	return &v.History[len(v.History)-1]
}

// Label writes the plan's steps for people: "1 % → 5m → 50 % → 5m → 100 %".
func (v *View) Label() string {
	var parts []string
	for _, s := range v.Steps {
		parts = append(parts, Describe(s.rollout(""), s.Off() && v.Direction == DirectionOff))
		if s.Hold > 0 {
			parts = append(parts, server.ShortDuration(s.Hold.D()))
		}
	}
	return strings.Join(parts, " → ")
}

func (r *run) view(now time.Time, live *Live) View {
	v := View{
		ID: r.ID, App: r.App, Switch: r.SwitchName, Cause: r.cause(), Direction: r.Direction, State: r.State,
		Steps: r.plan.Steps, OnFailure: r.plan.OnFailure, Step: r.progress.Step, Note: r.progress.Note,
		Request: r.progress.Request, Live: live, Before: r.before, Version: r.Version, CreatedBy: r.CreatedBy,
		Reason: r.Reason, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), EndedAt: r.EndedAt,
	}
	v.History = make([]StepView, 0, len(r.progress.Steps))
	for _, rec := range r.progress.Steps {
		sv := StepView{StepRecord: rec, Target: Describe(rec.Rollout, rec.Off), HoldEndsAt: rec.HoldEndsAt(r.plan)}
		if sv.HoldEndsAt != nil && rec.EndedAt == nil && r.State == Running {
			if left := sv.HoldEndsAt.Sub(now); left > 0 {
				sv.HoldLeft = server.ShortDuration(left.Round(time.Second))
			}
		}
		v.History = append(v.History, sv)
	}
	return v
}

// sameRollout reports whether two rollouts put the same members in.
func sameRollout(a, b wire.Rollout) bool {
	return a.Basis() == b.Basis() && a.Stickiness == b.Stickiness && strings.TrimSpace(a.Selector) == strings.TrimSpace(b.Selector)
}
