package notify

import (
	"context"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/server/retention"

	"github.com/switchyard-io/switchyard/server"
)

// Job is the leader's delivery job. Each step, in fenced transactions:
//
//  1. dispatch: every event not yet dispatched gets one delivery per
//     channel whose filter matches (pending, due now), and is marked
//     dispatched, in the same transaction;
//  2. claim: due deliveries are marked in flight ("sending", attempts+1,
//     next attempt pushed past the request's timeout) up to the free
//     request slots, at most PerChannel per channel;
//  3. send: each claimed delivery is posted on a goroutine of its own,
//     bounded by Timeout, and its outcome recorded in another fenced
//     transaction: delivered, failed for good, or pending until its
//     backoff has passed.
//
// A step never waits for a request, so a receiver that never answers
// holds one slot for Timeout and delays nothing else. A leader that dies
// mid-request leaves its delivery in flight; the next leader sends it
// again once its lease has passed, so a receiver may see an event twice
// across a leader crash (and drops it by its idempotency key) but never
// loses one.
type Job struct {
	s    *Service
	wake chan struct{}

	mu       sync.Mutex
	inflight map[int64]int64 // delivery id → channel id, requests under way
	sends    sync.WaitGroup
}

// Job returns the service's delivery job.
func (s *Service) Job() *Job {
	return &Job{s: s, wake: make(chan struct{}, 1), inflight: map[int64]int64{}}
}

// Name names the job in logs.
func (j *Job) Name() string { return "notify" }

// Every is the period between steps.
func (j *Job) Every() time.Duration { return j.s.cfg.Every }

// Wake asks for a step whenever a request finished, so its slot serves
// the next due delivery at once.
func (j *Job) Wake() <-chan struct{} { return j.wake }

// Wait waits for the requests under way to finish.
func (j *Job) Wait() { j.sends.Wait() }

// Step dispatches new events and starts due deliveries. The old log is
// pruned by the retention job (PruneDeliveries, PruneEvents).
func (j *Job) Step(ctx context.Context, t server.Term, now time.Time) error {
	now = now.UTC()
	if err := j.dispatch(ctx, t, now); err != nil {
		return err
	}
	return j.start(ctx, t, now)
}

// dispatchBatch bounds the events one transaction dispatches.
const dispatchBatch = 200

// dispatch makes the deliveries of the events not yet dispatched.
func (j *Job) dispatch(ctx context.Context, t server.Term, now time.Time) error {
	// A plain read first: most steps find nothing, and need no transaction.
	var waiting []int64
	if err := j.s.db.WithContext(ctx).Model(&row{}).Where("dispatched_at IS NULL").Limit(1).Pluck("id", &waiting).Error; err != nil || len(waiting) == 0 {
		return err
	}
	for range 10 {
		var n int
		_, err := j.s.svc.InTermLazyAudit(ctx, t, func(jt *server.JobTx) error {
			tx := jt.DB()
			var evs []row
			if err := tx.Where("dispatched_at IS NULL").Order("id").Limit(dispatchBatch).Find(&evs).Error; err != nil || len(evs) == 0 {
				return err
			}
			n = len(evs)
			var chans []Channel
			if err := tx.Find(&chans).Error; err != nil {
				return err
			}
			ids := make([]int64, 0, len(evs))
			for _, ev := range evs {
				ids = append(ids, ev.ID)
				for _, ch := range chans {
					if !ch.Wants(Kind(ev.Kind), ev.App) {
						continue
					}
					d := delivery{NotificationID: ev.ID, ChannelID: ch.ID, Status: StatusPending, NextAttemptAt: &now, CreatedAt: now}
					if err := tx.Create(&d).Error; err != nil {
						return err
					}
				}
			}
			return tx.Model(&row{}).Where("id IN ?", ids).Update("dispatched_at", now).Error
		})
		if err != nil || n < dispatchBatch {
			return err
		}
	}
	return nil
}

// PruneDeliveries deletes the deliveries that finished before cut
// (server/retention); unfinished ones stay whatever their age.
func PruneDeliveries(tx *gorm.DB, cut time.Time, limit int) (int64, error) {
	return retention.Delete(tx, &delivery{}, limit, "finished_at < ?", cut)
}

// PruneEvents deletes the events dispatched before cut that have no
// delivery left (prune the deliveries first); undispatched ones stay.
func PruneEvents(tx *gorm.DB, cut time.Time, limit int) (int64, error) {
	return retention.Delete(tx, &row{}, limit,
		"dispatched_at < ? AND NOT EXISTS (SELECT 1 FROM deliveries WHERE deliveries.notification_id = notifications.id)", cut)
}

// start claims due deliveries up to the free slots and sends each on a
// goroutine of its own.
func (j *Job) start(ctx context.Context, t server.Term, now time.Time) error {
	cfg := &j.s.cfg
	j.mu.Lock()
	free := cfg.Concurrency - len(j.inflight)
	busy := map[int64]int{}
	var mine []int64
	for id, ch := range j.inflight {
		busy[ch]++
		mine = append(mine, id)
	}
	j.mu.Unlock()
	if free <= 0 {
		return nil
	}
	q := j.s.db.WithContext(ctx).Where("finished_at IS NULL AND next_attempt_at <= ?", now)
	if len(mine) > 0 {
		q = q.Where("id NOT IN ?", mine)
	}
	var due []delivery
	if err := q.Order("next_attempt_at, id").Limit(free * 4).Find(&due).Error; err != nil {
		return err
	}
	var picked []delivery
	for _, d := range due {
		if len(picked) < free && busy[d.ChannelID] < cfg.PerChannel {
			busy[d.ChannelID]++
			picked = append(picked, d)
		}
	}
	if len(picked) == 0 {
		return nil
	}
	var claimed []attempt
	_, err := j.s.svc.InTermLazyAudit(ctx, t, func(jt *server.JobTx) error {
		claimed = claimed[:0]
		tx := jt.DB()
		lease := now.Add(cfg.lease())
		var evIDs, chIDs []int64
		for _, d := range picked {
			res := tx.Model(&delivery{}).Where("id = ? AND attempts = ? AND finished_at IS NULL", d.ID, d.Attempts).
				Updates(map[string]any{"status": StatusSending, "attempts": d.Attempts + 1, "last_attempt_at": now, "next_attempt_at": lease})
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 1 {
				d.Status, d.Attempts, d.LastAttemptAt, d.NextAttemptAt = StatusSending, d.Attempts+1, &now, &lease
				claimed = append(claimed, attempt{d: d})
				evIDs, chIDs = append(evIDs, d.NotificationID), append(chIDs, d.ChannelID)
			}
		}
		if len(claimed) == 0 {
			return nil
		}
		var chans []Channel
		var evs []row
		if err := tx.Where("id IN ?", chIDs).Find(&chans).Error; err != nil {
			return err
		}
		if err := tx.Where("id IN ?", evIDs).Find(&evs).Error; err != nil {
			return err
		}
		for i := range claimed {
			for _, ch := range chans {
				if ch.ID == claimed[i].d.ChannelID {
					claimed[i].ch = ch
				}
			}
			for _, ev := range evs {
				if ev.ID == claimed[i].d.NotificationID {
					claimed[i].ev = ev
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, at := range claimed {
		if at.ch.ID == 0 || at.ev.ID == 0 {
			continue // deleted meanwhile: nothing to send
		}
		j.mu.Lock()
		j.inflight[at.d.ID] = at.ch.ID
		j.mu.Unlock()
		j.sends.Add(1)
		go j.deliver(ctx, t, at)
	}
	return nil
}

// deliver sends one claimed attempt and records its outcome.
func (j *Job) deliver(ctx context.Context, t server.Term, at attempt) {
	defer func() {
		j.mu.Lock()
		delete(j.inflight, at.d.ID)
		j.mu.Unlock()
		j.sends.Done()
		select {
		case j.wake <- struct{}{}:
		default:
		}
	}()
	res := j.s.send(ctx, at)
	log := j.s.cfg.Logger
	if !res.ok() && ctx.Err() == nil {
		log.Warn("notify: delivery attempt failed", "channel", at.ch.Name, "delivery", at.d.ID, "attempt", at.d.Attempts, "event", at.ev.EventKey, "err", res.Err)
	}
	_, err := j.s.svc.InTermLazyAudit(ctx, t, func(jt *server.JobTx) error {
		return finish(jt.DB(), at, res, j.s.svc.Now(), j.s.cfg.retry())
	})
	if err != nil && ctx.Err() == nil {
		log.Warn("notify: delivery outcome not recorded; the next leader retries it", "delivery", at.d.ID, "err", err)
	}
}
