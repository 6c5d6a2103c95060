package drill

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/server/egress"
)

// Drill is a drill as stored.
type Drill struct {
	ID              int64 `gorm:"primaryKey"`
	App             string
	Name            string
	SwitchName      string
	Spec            string // JSON of Spec
	Enabled         bool
	LastScheduledAt *time.Time
	Version         int64
	Reason          string
	UpdatedBy       string
	UpdatedAt       time.Time
	CreatedAt       time.Time
}

// TableName pins the table name.
func (Drill) TableName() string { return "drills" }

// Target is how the audit log names the drill.
func (d *Drill) Target() string { return "drill/" + d.App + "/" + d.Name }

func (d *Drill) spec() (Spec, error) {
	var s Spec
	err := json.Unmarshal([]byte(d.Spec), &s)
	return s, err
}

// DrillView is the API representation of a drill.
type DrillView struct {
	App  string `json:"app"`
	Name string `json:"name"`
	Spec
	Enabled bool `json:"enabled"`
	// NextRun is the schedule's next cron time (absent: on demand only).
	NextRun   *time.Time `json:"next_run,omitempty"`
	Version   int64      `json:"version"`
	Reason    string     `json:"reason"`
	UpdatedBy string     `json:"updated_by"`
	UpdatedAt time.Time  `json:"updated_at"`
	CreatedAt time.Time  `json:"created_at"`
}

// View returns the API representation as of now for any reader (and the
// audit log): probe header values and query strings hidden.
func (d *Drill) View(now time.Time) DrillView { return d.ViewFor(now, false) }

// ViewFor is View; full is true for those who may change the app, who also
// see the probes' query strings. Header values are hidden from everyone.
func (d *Drill) ViewFor(now time.Time, full bool) DrillView {
	s, _ := d.spec()
	v := DrillView{App: d.App, Name: d.Name, Spec: s, Enabled: d.Enabled, Version: d.Version, Reason: d.Reason,
		UpdatedBy: d.UpdatedBy, UpdatedAt: d.UpdatedAt.UTC(), CreatedAt: d.CreatedAt.UTC()}
	v.Spec.Enabled = nil
	v.Spec = v.Spec.redacted(full).canonical()
	if pl, err := s.compile(); err == nil && d.Enabled {
		from := now
		if d.LastScheduledAt != nil && d.LastScheduledAt.After(now) {
			from = *d.LastScheduledAt
		}
		if next := pl.next(from); !next.IsZero() {
			v.NextRun = &next
		}
	}
	return v
}

// Run is one run of a drill as stored: also a refused or missed one.
type Run struct {
	ID            int64 `gorm:"primaryKey"`
	App           string
	Drill         string
	SwitchName    string
	Number        int64
	DryRun        bool
	StartedVia    string // "schedule" or "manual"
	StartedBy     string
	StartedByKind string
	Reason        string
	ScheduledFor  *time.Time
	Phase         string
	Outcome       string
	Summary       string
	LeaseID       int64
	AbortRequest  string
	// Count is how many cron times a refused or missed scheduled run
	// stands for: consecutive ones coalesce into one row, from
	// ScheduledFor to LastScheduledFor.
	Count            int
	LastScheduledFor *time.Time
	// Spec is the drill's Spec when the run was made, without probe
	// header values (see Spec.secretFree); DrillVersion and SpecSHA256
	// name it.
	Spec         string
	DrillVersion int64
	SpecSHA256   string `gorm:"column:spec_sha256"`
	State        string // JSON of Progress
	CreatedAt    time.Time
	StartedAt    *time.Time
	RevertedAt   *time.Time
	FinishedAt   *time.Time
}

// TableName pins the table name.
func (Run) TableName() string { return "drill_runs" }

// Started via.
const (
	ViaSchedule = "schedule"
	ViaManual   = "manual"
)

// Cause names the run in audit events: drill/<app>/<drill>#<n>.
func (r *Run) Cause() string { return fmt.Sprintf("drill/%s/%s#%d", r.App, r.Drill, r.Number) }

func (r *Run) target() string { return "drill/" + r.App + "/" + r.Drill }

func (r *Run) progress() *Progress {
	p := &Progress{}
	_ = json.Unmarshal([]byte(r.State), p)
	return p
}

func (r *Run) plan() (*plan, error) {
	var s Spec
	if err := json.Unmarshal([]byte(r.Spec), &s); err != nil {
		return nil, err
	}
	return s.compile()
}

// RunView is the API representation of a run: its report.
type RunView struct {
	ID            int64      `json:"id"`
	App           string     `json:"app"`
	Drill         string     `json:"drill"`
	Switch        string     `json:"switch"`
	Number        int64      `json:"number"`
	Cause         string     `json:"cause"`
	DryRun        bool       `json:"dry_run"`
	StartedVia    string     `json:"started_via"`
	StartedBy     string     `json:"started_by"`
	StartedByKind string     `json:"started_by_kind"`
	Reason        string     `json:"reason,omitempty"`
	ScheduledFor  *time.Time `json:"scheduled_for,omitempty"`
	// Count and LastScheduledFor: a refused or missed row standing for
	// several cron times.
	Count            int        `json:"count"`
	LastScheduledFor *time.Time `json:"last_scheduled_for,omitempty"`
	Phase            string     `json:"phase"`
	Outcome          string     `json:"outcome,omitempty"`
	Summary          string     `json:"summary,omitempty"`
	AbortRequest     string     `json:"abort_request,omitempty"`
	CreatedAt        time.Time  `json:"created_at"`
	StartedAt        *time.Time `json:"started_at,omitempty"`
	RevertedAt       *time.Time `json:"reverted_at,omitempty"`
	FinishedAt       *time.Time `json:"finished_at,omitempty"`
	Spec             Spec       `json:"spec"`
	DrillVersion     int64      `json:"drill_version"`
	SpecSHA256       string     `json:"spec_sha256"`
	Progress         *Progress  `json:"report"`
}

// View returns the report of the run for any reader (and the audit log):
// no answer excerpts, no probe query strings.
func (r *Run) View() RunView { return r.ViewFor(false) }

// ViewFor is View; full is true for those who may change the app, who also
// see the answers' excerpts and the probes' query strings.
func (r *Run) ViewFor(full bool) RunView {
	var s Spec
	_ = json.Unmarshal([]byte(r.Spec), &s)
	p := r.progress()
	if !full {
		p.forReader()
	}
	return RunView{
		ID: r.ID, App: r.App, Drill: r.Drill, Switch: r.SwitchName, Number: r.Number, Cause: r.Cause(),
		DryRun: r.DryRun, StartedVia: r.StartedVia, StartedBy: r.StartedBy, StartedByKind: r.StartedByKind,
		Reason: r.Reason, ScheduledFor: utc(r.ScheduledFor), Phase: r.Phase, Outcome: r.Outcome, Summary: r.Summary,
		AbortRequest: r.AbortRequest, CreatedAt: r.CreatedAt.UTC(), StartedAt: utc(r.StartedAt),
		RevertedAt: utc(r.RevertedAt), FinishedAt: utc(r.FinishedAt), Spec: s.redacted(full), Progress: p,
		Count: max(r.Count, 1), LastScheduledFor: utc(r.LastScheduledFor), DrillVersion: r.DrillVersion, SpecSHA256: r.SpecSHA256,
	}
}

// Open reports whether the run is still in progress.
func (r *Run) Open() bool { return r.FinishedAt == nil }

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func encode(p *Progress) string {
	b, err := json.Marshal(p)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// HiddenValue stands for a probe header value in every view; a PATCH that
// sends it back keeps the stored value.
const HiddenValue = "(hidden)"

// secretFree is s as a run stores it: probe header values (tokens,
// cookies) are left out, their names kept. The leader takes the values
// from the drill when it probes (Job.probeHeaders).
func (s Spec) secretFree() Spec {
	return s.maskHeaders("")
}

// redacted is s as shown: probe header values (tokens, cookies) are
// hidden; for readers who may not change the app (full false) the probe
// URLs' query strings too. The drill's stored spec keeps them (sealed).
func (s Spec) redacted(full bool) Spec {
	s = s.maskHeaders(HiddenValue)
	if !full {
		for i := range s.Probes {
			s.Probes[i].URL = egress.RedactQuery(s.Probes[i].URL)
		}
	}
	return s
}

// maskHeaders is s with every probe header value replaced by mask.
func (s Spec) maskHeaders(mask string) Spec {
	probes := make([]Probe, len(s.Probes))
	for i, p := range s.Probes {
		if len(p.Headers) > 0 {
			h := make(map[string]string, len(p.Headers))
			for k := range p.Headers {
				h[k] = mask
			}
			p.Headers = h
		}
		probes[i] = p
	}
	s.Probes = probes
	return s
}

// forReader removes what only those who may change the app see: answer
// excerpts and probe query strings.
func (p *Progress) forReader() {
	for _, rounds := range [][]ProbeRound{p.Baseline, p.Degraded, p.After} {
		for i := range rounds {
			rounds[i].URL = egress.RedactQuery(rounds[i].URL)
			if f := rounds[i].FirstFailure; f != nil {
				c := *f
				c.Body = ""
				rounds[i].FirstFailure = &c
			}
		}
	}
	if p.Verdicts != nil {
		for _, v := range p.Verdicts.all() {
			kept := v.Details[:0:0]
			for _, d := range v.Details {
				if !strings.HasPrefix(d, firstFailingBody) {
					kept = append(kept, d)
				}
			}
			v.Details = kept
		}
	}
}
