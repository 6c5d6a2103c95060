package audit

import (
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Why a witness refuses a checkpoint (WitnessError.Reason).
const (
	RefusedSignature   = "signature"   // not signed by a trusted key, or a bad signature
	RefusedOrigin      = "origin"      // a checkpoint of another log
	RefusedTruncated   = "truncated"   // smaller than a checkpoint seen before
	RefusedSplitView   = "split view"  // another root for a size seen before
	RefusedConsistency = "consistency" // the new tree does not extend the one seen
)

// WitnessError is a witness's refusal of a checkpoint: the log was
// rewritten, truncated or forked, or the checkpoint is not the log's.
type WitnessError struct {
	Reason string
	Detail string
}

func (e *WitnessError) Error() string { return e.Reason + ": " + e.Detail }

// ProveFunc fetches the consistency proof from the tree of size from to the
// tree of size to.
type ProveFunc func(from, to int64) (tlog.TreeProof, error)

// Witness checks a signed checkpoint against the last one the witness
// accepted (prev; nil on its first run) and returns it parsed when it may
// replace prev. It verifies the signature with the trusted keys, then that
// the new tree extends the one seen: same origin, not smaller, the same
// root for the same size, and for a bigger size a consistency proof from
// prove that checks. A refusal is a *WitnessError; other errors (prove
// could not fetch) say nothing about the log.
func Witness(prev *Checkpoint, msg []byte, known note.Verifiers, prove ProveFunc) (Checkpoint, error) {
	next, err := OpenCheckpoint(msg, known)
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &unverified):
			return next, &WitnessError{RefusedSignature, "the checkpoint is not signed by a trusted key (--key)"}
		case errors.As(err, &invalid):
			return next, &WitnessError{RefusedSignature, "bad signature by " + invalid.Name}
		}
		return next, &WitnessError{RefusedSignature, "the checkpoint is not a valid signed note: " + err.Error()}
	}
	if prev == nil {
		return next, nil
	}
	switch {
	case next.Origin != prev.Origin:
		return next, &WitnessError{RefusedOrigin, fmt.Sprintf("checkpoint of %q, the state holds %q", next.Origin, prev.Origin)}
	case next.Size < prev.Size:
		return next, &WitnessError{RefusedTruncated, fmt.Sprintf("the log has %d events, %d were seen before", next.Size, prev.Size)}
	case next.Size == prev.Size:
		if next.Root != prev.Root {
			return next, &WitnessError{RefusedSplitView, fmt.Sprintf("two roots for size %d: %s seen before, now %s", next.Size, prev.Root, next.Root)}
		}
		return next, nil
	case prev.Size == 0:
		return next, nil
	}
	proof, err := prove(prev.Size, next.Size)
	if err != nil {
		return next, fmt.Errorf("audit: consistency proof %d→%d: %w", prev.Size, next.Size, err)
	}
	if err := tlog.CheckTree(proof, next.Size, next.Root, prev.Size, prev.Root); err != nil {
		return next, &WitnessError{RefusedConsistency, fmt.Sprintf("the log of %d events does not extend the %d seen before (history rewritten): %v", next.Size, prev.Size, err)}
	}
	return next, nil
}
