package ordering

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// policyLess is the relation a policy induces on items through their keys.
func policyLess(p Policy, a, b *Item) bool { return p.Key(a).less(p.Key(b)) }

func TestPoliciesAreStrictWeakOrders(t *testing.T) {
	for _, pc := range policyCases {
		t.Run(pc.policy.TypeName(), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				a, b, c := genItem(t, 0), genItem(t, 1), genItem(t, 2)
				less := func(x, y *Item) bool { return policyLess(pc.policy, x, y) }
				incomparable := func(x, y *Item) bool { return !less(x, y) && !less(y, x) }
				if less(a, a) {
					t.Fatal("not irreflexive: a < a")
				}
				if less(a, b) && less(b, a) {
					t.Fatal("not asymmetric: a < b and b < a")
				}
				if less(a, b) && less(b, c) && !less(a, c) {
					t.Fatal("not transitive: a < b < c but not a < c")
				}
				if incomparable(a, b) && incomparable(b, c) && !incomparable(a, c) {
					t.Fatal("incomparability not transitive")
				}
			})
		})
	}
}

// TestPoliciesMatchReference checks each policy's keys against a restatement
// of its rules with big integers.
func TestPoliciesMatchReference(t *testing.T) {
	for _, pc := range policyCases {
		t.Run(pc.policy.TypeName(), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				a, b := genItem(t, 0), genItem(t, 1)
				if got, want := pc.policy.Key(a).Compare(pc.policy.Key(b)), pc.ref(a, b); got != want {
					t.Fatalf("key order %d, reference %d\na: %+v\nb: %+v", got, want, a, b)
				}
			})
		})
	}
}

// TestSLODeadlineBeforeNoDeadline: every in-range SLO, up to the largest,
// sorts before every item without one, whatever the received times.
func TestSLODeadlineBeforeNoDeadline(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := rapid.OneOf(rapid.Int64Range(0, maxSLOMillis), rapid.Int64Range(maxSLOMillis-10, maxSLOMillis)).Draw(t, "ms")
		with := &Item{ReceivedTime: anyTime(t, "with"), Header: http.Header{SLOTTFTHeader: {strconv.FormatInt(ms, 10)}}}
		without := &Item{ReceivedTime: anyTime(t, "without"), Header: http.Header{}}
		if rapid.Bool().Draw(t, "invalid header") {
			without.Header.Set(SLOTTFTHeader, rapid.SampledFrom([]string{"", "x", "-1", "9223372036855"}).Draw(t, "value"))
		}
		if !policyLess(SLODeadline(), with, without) {
			t.Fatalf("item with SLO %d ms does not precede an item without one", ms)
		}
	})
}

func TestSLOHeaderEdges(t *testing.T) {
	received := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	// Each case gives the headers and the expected SLO, or -1 for none.
	cases := []struct {
		name   string
		header http.Header
		want   int64
	}{
		{"zero", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"0"}}, 0},
		{"plain", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"250"}}, 250},
		{"surrounding spaces", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"  250 "}}, 250},
		{"tabs", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"\t250\t"}}, 250},
		{"plus sign", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"+5"}}, 5},
		{"leading zeros", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"007"}}, 7},
		{"alias only", http.Header{"X-Slo-Ttft-Ms": {"40"}}, 40},
		{"both names, new wins", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"10"}, "X-Slo-Ttft-Ms": {"40"}}, 10},
		{"both names, new invalid", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"abc"}, "X-Slo-Ttft-Ms": {"40"}}, -1},
		{"both names, new empty", http.Header{"X-Llm-D-Slo-Ttft-Ms": {""}, "X-Slo-Ttft-Ms": {"40"}}, -1},
		{"missing", http.Header{"X-Other": {"1"}}, -1},
		{"nil header", nil, -1},
		{"empty", http.Header{"X-Llm-D-Slo-Ttft-Ms": {""}}, -1},
		{"only spaces", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"   "}}, -1},
		{"letters", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"abc"}}, -1},
		{"unit suffix", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"100ms"}}, -1},
		{"decimal", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"1.5"}}, -1},
		{"inner space", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"1 0"}}, -1},
		{"hex", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"0x10"}}, -1},
		{"underscore", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"1_000"}}, -1},
		{"negative", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"-1"}}, -1},
		{"minus zero", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"-0"}}, 0},
		{"largest duration", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"9223372036854"}}, 9223372036854},
		{"overflows duration", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"9223372036855"}}, -1},
		{"overflows int64", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"9223372036854775808"}}, -1},
		{"lower-case name", http.Header{"x-llm-d-slo-ttft-ms": {"30"}}, 30},
		{"mixed-case name", http.Header{"X-LLM-d-Slo-TTFT-ms": {"30"}}, 30},
		{"mixed-case alias", http.Header{"x-SLO-ttft-MS": {"30"}}, 30},
		{"mixed-case new beats alias", http.Header{"x-llm-d-SLO-ttft-ms": {"x"}, "X-Slo-Ttft-Ms": {"30"}}, -1},
		{"first value counts", http.Header{"X-Llm-D-Slo-Ttft-Ms": {"20", "10"}}, 20},
		{"key without values is absent", http.Header{"X-Llm-D-Slo-Ttft-Ms": {}, "X-Slo-Ttft-Ms": {"30"}}, 30},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			it := &Item{ReceivedTime: received, Header: tc.header}
			got := SLODeadline().Key(it)
			want := Key{Class: 1, Primary: TimeOrdinal(received), Secondary: TimeOrdinal(received)}
			if tc.want >= 0 {
				want = Key{Primary: DeadlineOrdinal(received, time.Duration(tc.want)*time.Millisecond), Secondary: TimeOrdinal(received)}
			}
			if got != want {
				t.Fatalf("Key = %+v; want %+v", got, want)
			}
		})
	}
}

func TestSLODeadlineBeyondTimeRange(t *testing.T) {
	// The largest SLO added to a late received time lies beyond what
	// UnixNano or time.Time.Add can express; it must still sort after a
	// slightly smaller one.
	received := time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)
	big := &Item{ReceivedTime: received, Header: http.Header{SLOTTFTHeader: {strconv.FormatInt(maxSLOMillis, 10)}}}
	smaller := &Item{ReceivedTime: received, Header: http.Header{SLOTTFTHeader: {strconv.FormatInt(maxSLOMillis-1, 10)}}}
	if !policyLess(SLODeadline(), smaller, big) {
		t.Fatal("deadline with the largest SLO does not sort after a smaller one")
	}
}

func TestEDFAndFCFSKeys(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	early := &Item{EnqueueTime: t0, TTL: time.Hour}
	lateShort := &Item{EnqueueTime: t0.Add(time.Minute), TTL: time.Second}
	noTTL := &Item{EnqueueTime: t0.Add(-time.Hour)}
	negTTL := &Item{EnqueueTime: t0.Add(-2 * time.Hour), TTL: -time.Second}
	if !policyLess(EDF(), lateShort, early) {
		t.Error("EDF: earlier deadline does not lead")
	}
	if !policyLess(EDF(), early, noTTL) || !policyLess(EDF(), early, negTTL) {
		t.Error("EDF: item with a TTL does not precede items without one")
	}
	if !policyLess(EDF(), negTTL, noTTL) {
		t.Error("EDF: items without TTL are not ordered by enqueue time")
	}
	if !policyLess(FCFS(), noTTL, early) || !policyLess(FCFS(), early, lateShort) {
		t.Error("FCFS: not ordered by enqueue time")
	}
}

func TestPolicyByName(t *testing.T) {
	for _, name := range []string{FCFSPolicyName, EDFPolicyName, SLODeadlinePolicyName} {
		p, err := PolicyByName(name)
		if err != nil || p.TypeName() != name {
			t.Errorf("PolicyByName(%q) = %v, %v", name, p, err)
		}
	}
	_, err := PolicyByName("lifo-ordering-policy")
	if !errors.Is(err, ErrUnknownPolicy) {
		t.Fatalf("error %v does not wrap ErrUnknownPolicy", err)
	}
	for _, want := range []string{`"lifo-ordering-policy"`, FCFSPolicyName, EDFPolicyName, SLODeadlinePolicyName} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestCapabilityString(t *testing.T) {
	for c, want := range map[Capability]string{
		CapabilityFIFO:                 "FIFO",
		CapabilityPriorityConfigurable: "PriorityConfigurable",
		0:                              "Capability(0)",
	} {
		if got := c.String(); got != want {
			t.Errorf("Capability(%d).String() = %q; want %q", int(c), got, want)
		}
	}
}

func TestHeaderValue(t *testing.T) {
	cases := []struct {
		name   string
		header http.Header
		lookup string
		want   string
		ok     bool
	}{
		{"canonical key", http.Header{"X-Foo": {"a"}}, "x-foo", "a", true},
		{"non-canonical key", http.Header{"x-FOO": {"b"}}, "X-Foo", "b", true},
		{"canonical wins over variant", http.Header{"x-foo": {"v"}, "X-Foo": {"c"}}, "X-FOO", "c", true},
		{"smallest variant wins", http.Header{"x-foo": {"l"}, "X-FOO": {"u"}}, "x-foo", "u", true},
		{"empty value is present", http.Header{"X-Foo": {""}}, "X-Foo", "", true},
		{"no values is absent", http.Header{"X-Foo": {}}, "X-Foo", "", false},
		{"absent", http.Header{"X-Bar": {"1"}}, "X-Foo", "", false},
		{"nil header", nil, "X-Foo", "", false},
		{"no unicode folding", http.Header{"X-\u212aey": {"1"}}, "X-Key", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			it := &Item{Header: tc.header}
			got, ok := it.HeaderValue(tc.lookup)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("HeaderValue(%q) = %q, %v; want %q, %v", tc.lookup, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestSLOKeyDoesNotAllocate(t *testing.T) {
	items := []*Item{
		{Header: http.Header{"X-Llm-D-Slo-Ttft-Ms": {"250"}}},
		{Header: http.Header{"x-slo-ttft-ms": {"250"}, "Accept": {"*/*"}}},
		{Header: http.Header{"Accept": {"*/*"}}},
	}
	for _, it := range items {
		if n := testing.AllocsPerRun(100, func() { SLODeadline().Key(it) }); n != 0 {
			t.Errorf("SLODeadline().Key(%v) allocates %v times", it.Header, n)
		}
	}
}

// FuzzSLOHeader checks the SLO header parser: it never panics, accepts
// exactly the in-range integers, and every in-range value round-trips
// through formatting and parsing (also through an item's key).
func FuzzSLOHeader(f *testing.F) {
	for _, s := range []string{"0", "250", " 7 ", "+5", "-1", "", "abc", "9223372036854", "9223372036855", "1e3", "0x1f"} {
		f.Add(s, int64(len(s)))
	}
	f.Add("", int64(math.MaxInt64))
	f.Add("", int64(math.MinInt64))
	received := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	f.Fuzz(func(t *testing.T, value string, ms int64) {
		if d, ok := parseSLO(value); ok {
			if d < 0 || d%time.Millisecond != 0 {
				t.Fatalf("parseSLO(%q) = %v, not a non-negative whole number of ms", value, d)
			}
			again, ok := parseSLO(strconv.FormatInt(d.Milliseconds(), 10))
			if !ok || again != d {
				t.Fatalf("parseSLO(%q) = %v, but its formatting parses to %v, %v", value, d, again, ok)
			}
		}
		inRange := ms >= 0 && ms <= maxSLOMillis
		d, ok := parseSLO(strconv.FormatInt(ms, 10))
		if ok != inRange || ok && d != time.Duration(ms)*time.Millisecond {
			t.Fatalf("parseSLO(%d) = %v, %v; in range: %v", ms, d, ok, inRange)
		}
		it := &Item{ReceivedTime: received, Header: http.Header{"x-LLM-d-slo-ttft-ms": {" " + strconv.FormatInt(ms, 10) + "\t"}}}
		want := Key{Class: 1, Primary: TimeOrdinal(received), Secondary: TimeOrdinal(received)}
		if inRange {
			want = Key{Primary: DeadlineOrdinal(received, time.Duration(ms)*time.Millisecond), Secondary: TimeOrdinal(received)}
		}
		if got := SLODeadline().Key(it); got != want {
			t.Fatalf("key for %d ms = %+v; want %+v", ms, got, want)
		}
	})
}

// SLOTTFT reads every header case the generator draws as the spec meant
// it: the objective when the case is valid, none otherwise.
func TestItemSLOTTFTMatchesSpec(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		it := genItem(t, 0)
		sp := it.Value.(spec)
		slo, ok := it.SLOTTFT()
		if ok != sp.hasSLO {
			t.Fatalf("%s: ok %v, want %v", sp.header, ok, sp.hasSLO)
		}
		if ok && slo != time.Duration(sp.sloMS)*time.Millisecond {
			t.Fatalf("%s: SLO %v, want %dms", sp.header, slo, sp.sloMS)
		}
	})
}
