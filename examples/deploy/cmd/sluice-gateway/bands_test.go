package main

import (
	"log/slog"
	"net/url"
	"testing"
)

// With the hand-off on, the backends serve the higher bands first: a
// request goes where it starts at once — fewer of its band and above
// than the slots — before the fewest in flight.
func TestPickByBandWithTheHandoff(t *testing.T) {
	var urls []*url.URL
	for _, raw := range []string{"http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"} {
		u, _ := url.Parse(raw)
		urls = append(urls, u)
	}
	const chat, batch = 10, -1
	load := func(p *pool, counts ...[2]int64) {
		for i, b := range p.list() {
			b.bands = bandLoad{}
			b.bands.add(chat, counts[i][0])
			b.bands.add(batch, counts[i][1])
			b.inFlight.Store(counts[i][0] + counts[i][1])
		}
	}
	plain := newPool(urls, poolConfig{log: slog.New(slog.DiscardHandler)})
	byBand := newPool(urls, poolConfig{log: slog.New(slog.DiscardHandler), byBand: true, slots: 4})
	for _, p := range []*pool{plain, byBand} {
		load(p, [2]int64{4, 0}, [2]int64{0, 6}, [2]int64{2, 3})
	}
	b := byBand.list()
	for range 3 {
		if got := byBand.pickFor(chat, true); got != b[2] {
			t.Fatalf("chat went to %s, want %s: it starts at once there and at %s, and has fewer in flight", got.name, b[2].name, b[1].name)
		}
	}
	if got := plain.pickFor(chat, true); got != plain.list()[0] {
		t.Errorf("without the hand-off chat went to %s, want the fewest in flight", got.name)
	}
	if got := byBand.pickFor(batch, true); got != b[0] {
		t.Errorf("batch went to %s, want %s: every band is above it, so the fewest in flight", got.name, b[0].name)
	}
	if got := byBand.pickFor(chat, false); got != b[0] {
		t.Errorf("a request with no band went to %s, want the fewest in flight", got.name)
	}
	load(byBand, [2]int64{4, 0}, [2]int64{0, 6}, [2]int64{4, 3})
	if got := byBand.pickFor(chat, true); got != b[1] {
		t.Errorf("chat went to %s, want %s, the one backend it starts at once on", got.name, b[1].name)
	}
	// Without declared slots, the fewest of its band and above.
	noSlots := newPool(urls, poolConfig{log: slog.New(slog.DiscardHandler), byBand: true})
	load(noSlots, [2]int64{1, 0}, [2]int64{0, 6}, [2]int64{2, 3})
	if got := noSlots.pickFor(chat, true); got != noSlots.list()[1] {
		t.Errorf("chat went to %s without declared slots, want the one running no chat", got.name)
	}
}

func TestBandLoad(t *testing.T) {
	var l bandLoad
	if got := l.atOrAbove(0); got != 0 {
		t.Fatalf("zero value: %d", got)
	}
	l.add(10, 2)
	l.add(0, 1)
	l.add(-1, 3)
	for _, tc := range []struct {
		band int
		want int64
	}{{11, 0}, {10, 2}, {5, 2}, {0, 3}, {-1, 6}, {-5, 6}} {
		if got := l.atOrAbove(tc.band); got != tc.want {
			t.Errorf("atOrAbove(%d) = %d, want %d", tc.band, got, tc.want)
		}
	}
	l.add(10, -2)
	l.add(-1, -5) // more than it holds: the band leaves, no negative count
	if got := l.atOrAbove(-10); got != 1 {
		t.Errorf("after the ends, atOrAbove(-10) = %d, want 1", got)
	}
	if len(l.n) != 1 {
		t.Errorf("bands kept: %v, want only band 0", l.n)
	}
}
