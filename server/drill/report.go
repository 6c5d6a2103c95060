package drill

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ReportFile is the run's report as a file to download: its name
// (<app>-<drill>-<run>.md or .json), content type and body.
func (r *Run) ReportFile(markdown, full bool) (name, contentType string, body []byte, err error) {
	name = r.App + "-" + r.Drill + "-" + strconv.FormatInt(r.Number, 10)
	if markdown {
		return name + ".md", "text/markdown; charset=utf-8", []byte(r.Markdown(full)), nil
	}
	body, err = json.Marshal(r.ViewFor(full))
	return name + ".json", "application/json; charset=utf-8", body, err
}

// Markdown is the run's report as a Markdown summary: outcome, who or what
// started it, timings, the four verdicts with their evidence, per-instance
// convergence and the probe rounds. full is as for View.
func (r *Run) Markdown(full bool) string {
	v := r.ViewFor(full)
	p := v.Progress
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	kind := "Drill"
	if r.DryRun {
		kind = "Dry run"
	}
	w("# %s %s/%s #%d: %s\n\n", kind, r.App, r.Drill, r.Number, cmpOr(r.Outcome, r.Phase))
	w("- Switch: `%s/%s`\n", r.App, r.SwitchName)
	w("- Started: %s (`%s`)\n", startedBy(r), r.Cause())
	if v.Summary != "" {
		w("- Summary: %s\n", v.Summary)
	}
	for _, t := range []struct {
		name string
		at   *time.Time
	}{{"Created", &v.CreatedAt}, {"Override on", p.AppliedAt}, {"Override off", p.RevertedAt}, {"Finished", v.FinishedAt}} {
		if t.at != nil {
			w("- %s: %s\n", t.name, stamp(*t.at))
		}
	}
	if p.LeaseTTLSeconds > 0 {
		w("- Override: etcd revision %d, lease TTL %d s; removed at revision %d\n", p.OverrideRevision, p.LeaseTTLSeconds, p.RevertRevision)
	}
	if len(p.HeldRules) > 0 {
		w("- Auto-triggers held while it ran: `%s`\n", strings.Join(p.HeldRules, "`, `"))
	}
	if len(p.Preflight) > 0 {
		w("\n## Preflight\n\n")
		for _, c := range p.Preflight {
			mark := "ok"
			if !c.OK {
				mark = "**refused**"
			}
			w("- %s: %s — %s\n", c.Name, mark, c.Detail)
		}
	}
	if p.Verdicts != nil {
		w("\n## Verdicts\n\n| check | result | why |\n|---|---|---|\n")
		for i, x := range p.Verdicts.all() {
			w("| %s | %s | %s |\n", verdictNames[i], x.Result, mdCell(x.Summary))
		}
		for i, x := range p.Verdicts.all() {
			if len(x.Details) == 0 {
				continue
			}
			w("\n### %s\n\n", verdictNames[i])
			for _, d := range x.Details {
				if body, ok := strings.CutPrefix(d, firstFailingBody); ok {
					f := fence(body)
					w("- first failing body:\n\n%sjson\n%s\n%s\n", f, body, f)
					continue
				}
				w("- %s\n", d)
			}
		}
	}
	if len(p.Instances) > 0 {
		w("\n## Instances\n\n| instance | in slice | degraded before → after | applied (ms) | rose (ms) | back (ms) | stopped (ms) |\n|---|---|---|---|---|---|---|\n")
		ids := make([]string, 0, len(p.Instances))
		for id := range p.Instances {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			ev := p.Instances[id]
			w("| %s | %v | %d → %d | %s | %s | %s | %s |\n", mdCell(id), ev.Targeted, ev.Before, ev.Degraded,
				msCell(ev.AppliedAfterMS), msCell(ev.RoseAfterMS), msCell(ev.BackAfterMS), msCell(ev.StoppedAfterMS))
		}
	}
	for _, sec := range []struct {
		name   string
		rounds []ProbeRound
	}{{"Probes before (undegraded)", p.Baseline}, {"Probes while degraded", p.Degraded}, {"Probes after", p.After}} {
		if len(sec.rounds) == 0 {
			continue
		}
		w("\n## %s\n\n", sec.name)
		for _, pr := range sec.rounds {
			w("- %s — p50 %.1f ms, p99 %.1f ms, statuses %s\n", pr.describe(), pr.P50MS, pr.P99MS, pr.statusCounts())
		}
	}
	if len(p.Conditions) > 0 {
		w("\n## Abort conditions (last evaluation)\n\n")
		for _, c := range p.Conditions {
			w("- `%s`: value %s, no data %v, error %q, breached %v\n", c.Query, cmpOr(c.Value, "—"), c.NoData, c.Error, c.Breached)
		}
	}
	if len(p.Timeline) > 0 {
		w("\n## Timeline\n\n")
		for _, n := range p.Timeline {
			w("- %s — %s\n", stamp(n.At), n.What)
		}
	}
	return b.String()
}

func mdCell(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ") }

func msCell(v *int64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprint(*v)
}

// fence is a Markdown code fence longer than any run of backticks in body,
// so the body cannot close it early (CommonMark: a fence closes only on a
// run at least as long as the one that opened it).
func fence(body string) string {
	longest, run := 0, 0
	for _, c := range body {
		if c == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}
