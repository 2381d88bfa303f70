package flowcontrol

import (
	"testing"
)

func TestBandSetSearch(t *testing.T) {
	set := &bandSet{desc: []*band{{priority: 9}, {priority: 4}, {priority: 0}, {priority: -3}}}
	cases := []struct {
		p     int
		i     int
		found bool
	}{{10, 0, false}, {9, 0, true}, {5, 1, false}, {4, 1, true}, {1, 2, false}, {0, 2, true}, {-1, 3, false}, {-3, 3, true}, {-4, 4, false}}
	for _, tc := range cases {
		if i, found := set.search(tc.p); i != tc.i || found != tc.found {
			t.Errorf("search(%d) = %d, %v; want %d, %v", tc.p, i, found, tc.i, tc.found)
		}
	}
}
