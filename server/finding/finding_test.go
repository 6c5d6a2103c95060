package finding_test

import (
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/server/finding"
)

// TestOpenResolve: one open finding per kind and target, refreshed when
// opened again; opening notifies once; a resolved finding says why, and
// the next occurrence is a new finding — on both databases.
func TestOpenResolve(t *testing.T) {
	for _, url := range []string{"", pgtest.NewDatabase(t)} {
		db := servertest.OpenDB(t, url, t.TempDir())
		now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		spec := finding.Spec{Kind: finding.ExpiredOn, Target: "switch/checkout/reco", App: "checkout", Severity: finding.Warning, Summary: "on for 30 days"}
		inTx := func(fn func(tx *gorm.DB) error) {
			t.Helper()
			if err := db.Transaction(fn); err != nil {
				t.Fatal(err)
			}
		}
		for i, want := range []bool{true, false} {
			inTx(func(tx *gorm.DB) error {
				opened, err := finding.Open(tx, spec, now.Add(time.Duration(i)*time.Hour))
				if opened != want {
					t.Errorf("open #%d: new=%v, want %v", i+1, opened, want)
				}
				return err
			})
		}
		inTx(func(tx *gorm.DB) error {
			ok, err := finding.Resolve(tx, finding.ExpiredOn, spec.Target, "renewed by olga", now.Add(2*time.Hour))
			if !ok {
				t.Error("nothing resolved")
			}
			return err
		})
		inTx(func(tx *gorm.DB) error { _, err := finding.Open(tx, spec, now.Add(3*time.Hour)); return err })
		all, err := finding.List(db, finding.Filter{Target: spec.Target})
		if err != nil || len(all) != 2 || all[0].ResolvedAt != nil || all[1].Resolution != "renewed by olga" || !all[1].Since.Equal(now) {
			t.Fatalf("findings %+v %v", all, err)
		}
		var notes int64
		db.Table("notifications").Where("kind = ?", "finding.opened").Count(&notes)
		if notes != 2 {
			t.Fatalf("%d notifications for two openings", notes)
		}
		if counts, err := finding.OpenCounts(db, finding.Filter{}); err != nil || counts[finding.Warning] != 1 {
			t.Fatalf("open counts %v %v", counts, err)
		}
		byKind, err := finding.OpenByKind(db)
		if err != nil || len(byKind) != len(finding.Kinds) || byKind[finding.ExpiredOn] != 1 || byKind[finding.TriggerLocked] != 0 {
			t.Fatalf("open by kind %v %v: want expired_on 1 and every other kind 0", byKind, err)
		}
		if s, err := db.DB(); err == nil {
			s.Close()
		}
	}
}
