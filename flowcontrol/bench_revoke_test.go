package flowcontrol_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicegate/sluice/flowcontrol"
	"github.com/sluicegate/sluice/flowcontrol/gate"
)

// nopClock is the real clock whose timers are never armed, so that an
// allocation a benchmark reports is the controller's own, not a timer's.
type nopClock struct{}

func (nopClock) Now() time.Time                                    { return time.Now() }
func (nopClock) AfterFunc(time.Duration, func()) flowcontrol.Timer { return nopTimer{} }

type nopTimer struct{}

func (nopTimer) Stop() bool { return true }

// BenchmarkRevocation measures one revocation decision among 10⁴ running
// admissions of a sheddable band, as one cycle: an interactive request
// arrives at a full gate, the decision revokes the newest batch admission,
// its holder confirms with Done, the interactive request takes the slot and
// ends, and a batch request takes the slot back. mode=wait, the baseline,
// is the same cycle without eviction: the interactive request waits until
// a batch admission ends.
func BenchmarkRevocation(b *testing.B) {
	const running = 10_000
	for _, mode := range []string{"evict", "wait"} {
		b.Run("mode="+mode+"/inflight=10000", func(b *testing.B) {
			cfg := flowcontrol.Config{
				Bands:            []flowcontrol.BandConfig{{Priority: 10}, {Priority: -1}},
				FallbackPriority: 10,
				Gate:             gate.MaxInFlight(running),
				Clock:            nopClock{},
			}
			if mode == "evict" {
				cfg.Eviction = &flowcontrol.Eviction{}
			}
			fc, err := flowcontrol.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(fc.Close)
			ctx := context.Background()
			batchReq := flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "batch", Priority: -1}}
			chatReq := flowcontrol.Request{Key: flowcontrol.FlowKey{ID: "chat", Priority: 10}}
			batch := make([]*flowcontrol.Admission, 0, running+1)
			admit := func() {
				a, err := fc.EnqueueAndWait(ctx, batchReq)
				if err != nil {
					b.Fatal(err)
				}
				batch = append(batch, a)
			}
			for range running {
				admit()
			}
			var chat *flowcontrol.Admission
			onChat := func(a *flowcontrol.Admission, err error) {
				if err != nil {
					panic(err)
				}
				chat = a
			}
			cycle := func() {
				fc.Submit(ctx, chatReq, onChat)
				// With eviction, the newest batch admission is the victim and
				// its Done confirms; without, it ends as if on its own.
				last := len(batch) - 1
				batch[last].Done()
				batch = batch[:last]
				if chat == nil {
					b.Fatal("the interactive request did not start")
				}
				chat.Done()
				chat = nil
				admit()
			}
			cycle()
			if mode == "evict" && fc.InFlight() != running {
				b.Fatalf("in flight %d", fc.InFlight())
			}
			b.ReportAllocs()
			for b.Loop() {
				cycle()
			}
		})
	}
}
