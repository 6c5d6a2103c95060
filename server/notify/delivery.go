package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/internal/oneline"
	"github.com/switchyard-io/switchyard/server/egress"
)

// Delivery states.
const (
	StatusPending   = "pending"   // waiting for its next attempt
	StatusSending   = "sending"   // an attempt is under way (or its console died)
	StatusDelivered = "delivered" // the receiver answered 2xx
	StatusFailed    = "failed"    // given up: no 2xx within the retry time
)

// delivery is one event for one channel, as the delivery log stores it.
type delivery struct {
	ID             int64 `gorm:"primaryKey"`
	NotificationID int64
	ChannelID      int64
	Status         string
	Attempts       int
	NextAttemptAt  *time.Time
	LastAttemptAt  *time.Time
	ResponseCode   int
	Error          string
	CreatedAt      time.Time
	FinishedAt     *time.Time
}

func (delivery) TableName() string { return "deliveries" }

// attempt is one claimed attempt of a delivery: what to send, where.
type attempt struct {
	d  delivery // as claimed: Attempts counts this attempt
	ch Channel
	ev row
}

// result is what one attempt got back.
type result struct {
	Code       int           // HTTP status; 0 when no answer came
	Err        string        // "" on a 2xx
	RetryAfter time.Duration // the receiver's Retry-After, if any
	Took       time.Duration
}

func (r result) ok() bool { return r.Err == "" }

// send makes one attempt: the signed request, bounded by timeout.
func (s *Service) send(ctx context.Context, at attempt) result {
	start := time.Now()
	res := s.post(ctx, at)
	res.Took = time.Since(start)
	return res
}

func (s *Service) post(ctx context.Context, at attempt) result {
	body, err := at.ev.body(at.ch.Format, s.cfg.Namespace)
	if err != nil {
		return result{Err: "encode: " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, at.ch.URL, bytes.NewReader(body))
	if err != nil {
		return result{Err: "request: " + err.Error()}
	}
	secret, err := s.cfg.Keys.Open(at.ch.Secret)
	if err != nil {
		return result{Err: err.Error()}
	}
	ts := s.svc.Now().Unix()
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "Switchyard-Notify/1")
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, Sign(secret, ts, body))
	h.Set(HeaderEvent, at.ev.Kind)
	h.Set(HeaderDelivery, strconv.FormatInt(at.d.ID, 10))
	h.Set(HeaderAttempt, strconv.Itoa(at.d.Attempts))
	h.Set(HeaderIdempotencyKey, at.ev.EventKey)
	resp, err := s.client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return result{Err: fmt.Sprintf("no answer within %v", s.cfg.Timeout)}
		}
		return result{Err: egress.Reason(err)}
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	res := result{Code: resp.StatusCode}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return res
	}
	res.Err = "HTTP " + strconv.Itoa(resp.StatusCode)
	if t := egress.Excerpt(snippet, 200); t != "" {
		res.Err += ": " + t
	}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
		res.RetryAfter = time.Duration(secs) * time.Second
	}
	return res
}

// retryPolicy bounds the retries of a delivery.
type retryPolicy struct {
	Min, Max time.Duration // the first backoff; the longest
	For      time.Duration // give up once the next attempt would start later than this after the delivery was made
}

// backoff is the wait after the n-th failed attempt: Min doubling per
// attempt up to Max, with equal jitter (half fixed, half random), so
// deliveries that failed together do not retry together.
func (p retryPolicy) backoff(n int, rnd func(int64) int64) time.Duration {
	d := p.Min
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	return d/2 + time.Duration(rnd(int64(d/2)+1))
}

// next decides what follows a failed attempt of a delivery made at
// created: the time of the next attempt, or give up. A receiver's
// Retry-After is honoured up to Max.
func (p retryPolicy) next(created, now time.Time, attempts int, retryAfter time.Duration, rnd func(int64) int64) (time.Time, bool) {
	if p.For <= 0 {
		return time.Time{}, false
	}
	wait := max(p.backoff(attempts, rnd), min(retryAfter, p.Max))
	at := now.Add(wait)
	if at.Sub(created) > p.For {
		return time.Time{}, false
	}
	return at, true
}

// finish records the outcome of attempt at in tx: delivered, failed for
// good, or pending again with its next attempt. It changes nothing when
// the delivery is no longer this attempt's (a new leader claimed it
// again).
func finish(tx *gorm.DB, at attempt, res result, now time.Time, p retryPolicy) error {
	now = now.UTC()
	set := map[string]any{"response_code": res.Code, "error": oneline.Cut(res.Err, 500)}
	switch next, retry := p.next(at.d.CreatedAt, now, at.d.Attempts, res.RetryAfter, rand.Int64N); {
	case res.ok():
		set["status"], set["finished_at"], set["next_attempt_at"] = StatusDelivered, now, nil
	case retry:
		set["status"], set["next_attempt_at"] = StatusPending, next.UTC()
	default:
		set["status"], set["finished_at"], set["next_attempt_at"] = StatusFailed, now, nil
	}
	return tx.Model(&delivery{}).Where("id = ? AND attempts = ? AND finished_at IS NULL", at.d.ID, at.d.Attempts).Updates(set).Error
}
