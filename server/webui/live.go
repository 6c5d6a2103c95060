package webui

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	clientv3 "go.etcd.io/etcd/client/v3"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// hub fans change notices out to every open event stream. Two sources
// feed it: one etcd watch on the namespace's published values (limits,
// overrides, switches — not instance acks and reports, which at scale are a
// thousand writes a second; a change made by another console or the API
// shows in milliseconds) and a once-a-second look at the audit log's head
// (users and tokens, and every change while etcd is unreachable). A stream learns only "something
// changed"; the page then fetches itself again and swaps its live regions.
// Instance acks and reports reach only the pages that show fleet data, as
// the fleet model's notices (see events).
//
// The hub owns its two goroutines: start runs them, stop ends them and
// returns once both have.
type hub struct {
	etcd *clientv3.Client
	db   *gorm.DB
	// from and end bound the watched keys: every published value and no
	// instance key (see newHub).
	from, end string
	// seq numbers the notices; it is the event id of the stream.
	seq atomic.Int64

	ctx    context.Context // ends at stop or when the etcd client closes
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	subs    map[chan int64]struct{}
	closing chan struct{}
	once    sync.Once
}

// newHub watches namespace ns. The kinds under a namespace sort as
// election < instances < limits < overrides < switches, so one range from
// limits/ to the end of switches/ holds every published value and no
// instance key.
func newHub(cli *clientv3.Client, db *gorm.DB, ns string) *hub {
	ctx, cancel := context.WithCancel(cli.Ctx())
	return &hub{
		etcd: cli, db: db, ctx: ctx, cancel: cancel, subs: map[chan int64]struct{}{}, closing: make(chan struct{}),
		from: wire.KindPrefix(ns, wire.KindLimits), end: clientv3.GetPrefixRangeEnd(wire.KindPrefix(ns, wire.KindSwitches)),
	}
}

// start runs the etcd watch and the audit poll until stop.
func (h *hub) start() {
	h.wg.Add(2)
	go func() { defer h.wg.Done(); h.watch(h.ctx) }()
	go func() { defer h.wg.Done(); h.pollAudit(h.ctx) }()
}

// stop ends the watch and the poll, waits for both, and ends every open
// stream. It may be called more than once.
func (h *hub) stop() {
	h.cancel()
	h.wg.Wait()
	h.close()
}

// watch watches etcd until ctx ends, re-watching after errors. When the
// etcd client closes it ends the open streams too.
func (h *hub) watch(ctx context.Context) {
	defer h.close()
	for ctx.Err() == nil {
		if resp, err := h.etcd.Get(ctx, h.from, clientv3.WithRange(h.end), clientv3.WithCountOnly()); err == nil {
			// Each attempt's watch is cancelled when it breaks, so a
			// re-watch does not leave the old stream behind.
			wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			for wr := range h.etcd.Watch(wctx, h.from, clientv3.WithRange(h.end), clientv3.WithRev(resp.Header.Revision+1)) {
				if wr.Err() != nil {
					break
				}
				if len(wr.Events) > 0 {
					h.publish()
				}
			}
			cancel()
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// pollAudit notices changes that do not reach etcd.
func (h *hub) pollAudit(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last int64 = -1
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		qctx, cancel := context.WithTimeout(ctx, 900*time.Millisecond)
		head, err := audit.Head(qctx, h.db)
		cancel()
		if err != nil {
			continue
		}
		var id int64
		if head != nil {
			id = head.ID
		}
		if last >= 0 && id != last {
			h.publish()
		}
		last = id
	}
}

func (h *hub) publish() {
	seq := h.seq.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- seq:
		default: // the stream already has a wake-up pending
		}
	}
}

func (h *hub) subscribe() (chan int64, func()) {
	ch := make(chan int64, 1)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}

// close ends every stream (console shutdown or etcd client closed).
func (h *hub) close() { h.once.Do(func() { close(h.closing) }) }

// Stream timing.
const (
	streamHeartbeat = 15 * time.Second
	streamLifetime  = 10 * time.Minute
)

// events is the server-sent event stream of "change" notices. A
// reconnecting browser sends Last-Event-ID and gets a change at once when it
// missed one (or talks to another console replica).
//
// With fleet=1 (pages that show fleet data) the stream also carries "fleet"
// events, at most one a second, when the fleet model changed: instance
// acks and reports wake only those pages. They have no id, so they leave
// Last-Event-ID at the last change; a reconnecting page refreshes anyway.
func (h *handler) events(c *gin.Context) {
	ch, unsubscribe := h.hub.subscribe()
	defer unsubscribe()
	var fleetCh <-chan struct{} // nil: never ready
	if c.Query("fleet") == "1" {
		var cancel func()
		fleetCh, cancel = h.fleet.Subscribe()
		defer cancel()
	}
	w := c.Writer
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 1000\n\n")
	cur := h.hub.seq.Load()
	if last, err := strconv.ParseInt(c.GetHeader("Last-Event-ID"), 10, 64); err == nil && last != cur {
		writeChange(w, cur)
	} else {
		fmt.Fprintf(w, "id: %d\n\n", cur)
	}
	w.Flush()
	ctx, cancel := context.WithTimeout(c.Request.Context(), streamLifetime)
	defer cancel()
	beat := time.NewTicker(streamHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.hub.closing:
			return
		case rev := <-ch:
			writeChange(w, rev)
		case <-fleetCh:
			fmt.Fprint(w, "event: fleet\ndata: \n\n")
		case <-beat.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		}
		w.Flush()
	}
}

func writeChange(w gin.ResponseWriter, seq int64) {
	fmt.Fprintf(w, "id: %d\nevent: change\ndata: %d\n\n", seq, seq)
}
