package ordering

import (
	"math/big"
	"net/http"
	"strconv"
	"time"

	"pgregory.net/rapid"
)

// spec records what the generator meant an item's SLO to be, so reference
// comparators need not parse headers themselves.
type spec struct {
	id     int
	sloMS  int64
	hasSLO bool
	header string // description of the header case, for failure messages
}

func specOf(it *Item) spec { return it.Value.(spec) }

// baseTime is the centre of generated times. Times are near it, so ties are
// common, or anywhere in a wide range where time.Time.Unix does not wrap.
var baseTime = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func genTime(t *rapid.T, label string) time.Time {
	switch rapid.IntRange(0, 3).Draw(t, label+" kind") {
	case 0, 1:
		return baseTime.Add(time.Duration(rapid.IntRange(0, 5).Draw(t, label+" ms")) * time.Millisecond)
	case 2:
		return time.Unix(rapid.Int64Range(-1e11, 1e11).Draw(t, label+" sec"), rapid.Int64Range(0, 999999999).Draw(t, label+" nsec")).UTC()
	default:
		// Locations do not matter, only the instant.
		return baseTime.Add(time.Duration(rapid.IntRange(0, 5).Draw(t, label+" ms")) * time.Millisecond).In(time.FixedZone("X", 3600))
	}
}

// sloCase is one way a request can carry (or fail to carry) an SLO.
type sloCase struct {
	name   string
	header func(h http.Header, ms int64)
	valid  bool // whether ms becomes the deadline
}

var sloCases = []sloCase{
	{"missing", func(http.Header, int64) {}, false},
	{"canonical", func(h http.Header, ms int64) { h.Set(SLOTTFTHeader, strconv.FormatInt(ms, 10)) }, true},
	{"lower-case key", func(h http.Header, ms int64) { h["x-llm-d-slo-ttft-ms"] = []string{strconv.FormatInt(ms, 10)} }, true},
	{"upper-case key", func(h http.Header, ms int64) { h["X-LLM-D-SLO-TTFT-MS"] = []string{strconv.FormatInt(ms, 10)} }, true},
	{"spaces and plus", func(h http.Header, ms int64) { h.Set(SLOTTFTHeader, " \t+"+strconv.FormatInt(ms, 10)+" ") }, true},
	{"alias only", func(h http.Header, ms int64) { h.Set(DeprecatedSLOTTFTHeader, strconv.FormatInt(ms, 10)) }, true},
	{"new invalid, alias valid", func(h http.Header, ms int64) {
		h.Set(SLOTTFTHeader, "soon")
		h.Set(DeprecatedSLOTTFTHeader, strconv.FormatInt(ms, 10))
	}, false},
	{"new valid, alias other", func(h http.Header, ms int64) {
		h.Set(SLOTTFTHeader, strconv.FormatInt(ms, 10))
		h.Set(DeprecatedSLOTTFTHeader, "1")
	}, true},
	{"empty", func(h http.Header, _ int64) { h.Set(SLOTTFTHeader, "") }, false},
	{"negative", func(h http.Header, ms int64) { h.Set(SLOTTFTHeader, "-"+strconv.FormatInt(ms+1, 10)) }, false},
	{"overflow", func(h http.Header, ms int64) { h.Set(SLOTTFTHeader, strconv.FormatInt(maxSLOMillis+1+ms%1000, 10)) }, false},
	{"letters", func(h http.Header, _ int64) { h.Set(SLOTTFTHeader, "12ms") }, false},
}

// genMS draws an SLO in milliseconds: small (ties), anywhere, or at the top
// of the range.
func genMS(t *rapid.T) int64 {
	switch rapid.IntRange(0, 2).Draw(t, "ms kind") {
	case 0:
		return rapid.Int64Range(0, 5).Draw(t, "ms")
	case 1:
		return rapid.Int64Range(0, maxSLOMillis).Draw(t, "ms")
	default:
		return maxSLOMillis - rapid.Int64Range(0, 3).Draw(t, "ms below max")
	}
}

func genTTL(t *rapid.T) time.Duration {
	switch rapid.IntRange(0, 3).Draw(t, "ttl kind") {
	case 0:
		return -time.Duration(rapid.Int64Range(0, 5).Draw(t, "negative ttl"))
	case 1:
		return time.Duration(rapid.Int64Range(0, 5).Draw(t, "ttl ms")) * time.Millisecond
	case 2:
		return time.Duration(rapid.Int64Range(1, 1<<63-1).Draw(t, "ttl"))
	default:
		return time.Duration(1<<63 - 1 - rapid.Int64Range(0, 3).Draw(t, "ttl below max"))
	}
}

// genItem draws an item with id, unqueued.
func genItem(t *rapid.T, id int) *Item {
	c := rapid.SampledFrom(sloCases).Draw(t, "slo case")
	ms := genMS(t)
	h := http.Header{}
	c.header(h, ms)
	if rapid.Bool().Draw(t, "unrelated header") {
		h.Set("X-Other", "1")
	}
	return &Item{
		ReceivedTime: genTime(t, "received"),
		EnqueueTime:  genTime(t, "enqueued"),
		Header:       h,
		TTL:          genTTL(t),
		ByteSize:     rapid.Int64Range(0, 1000).Draw(t, "bytes"),
		Value:        spec{id: id, sloMS: ms, hasSLO: c.valid, header: c.name},
	}
}

// nanos is t as an exact number of nanoseconds since the Unix epoch; the
// generators keep t where Unix() does not wrap.
func nanos(t time.Time) *big.Int {
	n := big.NewInt(t.Unix())
	n.Mul(n, big.NewInt(1e9))
	return n.Add(n, big.NewInt(int64(t.Nanosecond())))
}

func plus(t time.Time, d time.Duration) *big.Int {
	n := nanos(t)
	return n.Add(n, big.NewInt(int64(d)))
}

// The reference comparators below restate each policy from the issue text
// with big integers. They ignore arrival order: a queue adds that.

func refFCFS(a, b *Item) int { return nanos(a.EnqueueTime).Cmp(nanos(b.EnqueueTime)) }

func refEDF(a, b *Item) int {
	ha, hb := a.TTL > 0, b.TTL > 0
	switch {
	case ha && !hb:
		return -1
	case !ha && hb:
		return 1
	case ha && hb:
		if c := plus(a.EnqueueTime, a.TTL).Cmp(plus(b.EnqueueTime, b.TTL)); c != 0 {
			return c
		}
	}
	return refFCFS(a, b)
}

func refSLO(a, b *Item) int {
	sa, sb := specOf(a), specOf(b)
	switch {
	case sa.hasSLO && !sb.hasSLO:
		return -1
	case !sa.hasSLO && sb.hasSLO:
		return 1
	case sa.hasSLO && sb.hasSLO:
		da := plus(a.ReceivedTime, time.Duration(sa.sloMS)*time.Millisecond)
		db := plus(b.ReceivedTime, time.Duration(sb.sloMS)*time.Millisecond)
		if c := da.Cmp(db); c != 0 {
			return c
		}
	}
	return nanos(a.ReceivedTime).Cmp(nanos(b.ReceivedTime))
}

type policyCase struct {
	policy Policy
	ref    func(a, b *Item) int
}

var policyCases = []policyCase{
	{FCFS(), refFCFS},
	{EDF(), refEDF},
	{SLODeadline(), refSLO},
}
