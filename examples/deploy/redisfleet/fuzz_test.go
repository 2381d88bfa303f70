package redisfleet_test

import (
	"encoding/json"
	"testing"

	"github.com/sluicegate/sluice/examples/deploy/redisfleet"
	"github.com/sluicegate/sluice/flowcontrol/fleet"
)

// FuzzDecode feeds the decoder what a hostile Redis could hold: it never
// panics, and whatever it accepts passes fleet.Replica.Check and encodes
// back to a value that decodes to the same state.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"v":1,"id":"router-0","at":1800000000000000000,"bands":[{"p":10,"w":3,"f":4,"d":1.5},{"p":0,"w":6,"f":8,"d":30}]}`))
	f.Add([]byte(`{"v":1,"id":"r","at":1,"bands":[]}`))
	f.Add([]byte(`{"v":1,"id":"r","at":1,"bands":[{"p":0,"w":1e30}]}`))
	f.Add([]byte(`{"v":1,"id":"r","at":1,"bands":[{"p":0},{"p":0}]}`))
	f.Add([]byte(`{"v":1,"id":"\u0000","at":1}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := redisfleet.Decode(data)
		if err != nil {
			return
		}
		if err := r.Check(); err != nil {
			t.Fatalf("Decode accepted %q, which Check refuses: %v", data, err)
		}
		again := encodeLikeStore(t, r)
		r2, err := redisfleet.Decode(again)
		if err != nil {
			t.Fatalf("re-encoded %q does not decode: %v", again, err)
		}
		if r2.ID != r.ID || !r2.At.Equal(r.At) || len(r2.Bands) != len(r.Bands) {
			t.Fatalf("round trip changed %+v into %+v", r, r2)
		}
		for i := range r.Bands {
			if r.Bands[i] != r2.Bands[i] {
				t.Fatalf("round trip changed band %d: %+v into %+v", i, r.Bands[i], r2.Bands[i])
			}
		}
	})
}

// encodeLikeStore writes r in the stored layout the package documents.
func encodeLikeStore(t *testing.T, r fleet.Replica) []byte {
	type band struct {
		P int     `json:"p"`
		W int64   `json:"w"`
		F int64   `json:"f"`
		D float64 `json:"d"`
	}
	bands := make([]band, len(r.Bands))
	for i, b := range r.Bands {
		bands[i] = band{b.Priority, b.Waiting, b.InFlight, b.Demand}
	}
	b, err := json.Marshal(struct {
		V     int    `json:"v"`
		ID    string `json:"id"`
		At    int64  `json:"at"`
		Bands []band `json:"bands"`
	}{1, r.ID, r.At.UnixNano(), bands})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
