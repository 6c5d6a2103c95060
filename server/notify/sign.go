package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Headers of every delivery.
const (
	// HeaderTimestamp is the Unix time (seconds) the request was signed at.
	HeaderTimestamp = "X-Switchyard-Timestamp"
	// HeaderSignature is "sha256=" + hex(HMAC-SHA256(secret, timestamp + "." + body)).
	HeaderSignature = "X-Switchyard-Signature"
	// HeaderEvent is the event's kind.
	HeaderEvent = "X-Switchyard-Event"
	// HeaderDelivery is the delivery's id in the console's delivery log.
	HeaderDelivery = "X-Switchyard-Delivery"
	// HeaderAttempt counts the attempts of the delivery, from 1.
	HeaderAttempt = "X-Switchyard-Attempt"
	// HeaderIdempotencyKey repeats the payload's idempotency key.
	HeaderIdempotencyKey = "Idempotency-Key"
)

// DefaultTolerance is how far from the receiver's clock a signed timestamp
// may be before Verify calls the request a replay.
const DefaultTolerance = 5 * time.Minute

// Sign returns the signature of body signed at ts (Unix seconds) with
// secret: "sha256=" + hex(HMAC-SHA256(secret, "<ts>.<body>")). Signing the
// timestamp with the body lets a receiver reject a replayed request whose
// timestamp is old, since it cannot be changed without the secret.
func Sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Errors of Verify.
var (
	ErrBadSignature = errors.New("notify: signature does not match")
	ErrReplay       = errors.New("notify: timestamp outside the tolerance (a replay?)")
)

// Verify is what a receiver does with a delivery: it checks that the
// signature header matches the body and the timestamp header, and that the
// timestamp is within tolerance of now. A receiver should also drop an
// idempotency key it has seen (deliveries are at least once).
func Verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	ts, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: no %s", ErrBadSignature, HeaderTimestamp)
	}
	got := strings.TrimSpace(h.Get(HeaderSignature))
	if !hmac.Equal([]byte(got), []byte(Sign(secret, ts, body))) {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: signed %v from now", ErrReplay, d.Round(time.Second))
	}
	return nil
}
