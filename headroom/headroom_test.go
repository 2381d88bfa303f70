package headroom_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/headroom"
)

// The tests named in the issue run one scenario through every way the
// header reaches a response: the net/http middleware, the ReverseProxy hook,
// and the plain-data mutation an ext_proc server sends to Envoy.

// scenario is one request admitted (or not) by a router, answered by a
// backend.
type scenario struct {
	reader capacity.Reader
	band   headroom.Band // what the admission step recorded
	// backend is the header the backend sends, keys used exactly as given;
	// nil means defaultBackend.
	backend http.Header
	// modelWorks runs after admission and before the response headers are
	// written, while the model generates.
	modelWorks func()
}

const (
	backendStatus = http.StatusCreated
	backendBody   = "generated tokens"
)

// defaultBackend spoofs the router's header, so every scenario also checks
// ownership.
func defaultBackend() http.Header {
	return http.Header{
		"X-Model":                             {"m1"},
		"X-Llm-D-Flow-Band-Headroom-Requests": {"999"},
	}
}

func (sc scenario) backendHeader() http.Header {
	src := sc.backend
	if src == nil {
		src = defaultBackend()
	}
	h := make(http.Header, len(src))
	for k, v := range src {
		h[k] = slices.Clone(v)
	}
	return h
}

func (sc scenario) request() *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader("{}"))
	if p, ok := sc.band.Priority(); ok {
		req = req.WithContext(headroom.NewContext(req.Context(), headroom.Admitted(p)))
	}
	return req
}

func (sc scenario) work() {
	if sc.modelWorks != nil {
		sc.modelWorks()
	}
}

// A surface serves a scenario and returns the response header as the client
// receives it. It fails the test if the response lost its status or body.
type surface struct {
	name  string
	serve func(t *testing.T, sc scenario) http.Header
}

var surfaces = []surface{
	{"Middleware", serveMiddleware},
	{"ModifyResponse", serveModifyResponse},
	{"MutationFor", serveMutation},
}

func serveMiddleware(t *testing.T, sc scenario) http.Header {
	t.Helper()
	backend := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		maps.Copy(w.Header(), sc.backendHeader())
		sc.work()
		w.WriteHeader(backendStatus)
		_, _ = io.WriteString(w, backendBody)
	})
	rec := httptest.NewRecorder()
	headroom.Middleware(sc.reader, backend).ServeHTTP(rec, sc.request())
	res := rec.Result()
	// Result's header is the map as it was when the header was written.
	checkResponse(t, res.StatusCode, rec.Body.String())
	return res.Header
}

func serveModifyResponse(t *testing.T, sc scenario) http.Header {
	t.Helper()
	req := sc.request()
	sc.work()
	res := &http.Response{
		StatusCode: backendStatus,
		Header:     sc.backendHeader(),
		Body:       io.NopCloser(strings.NewReader(backendBody)),
		Request:    req,
	}
	if err := headroom.ModifyResponse(sc.reader)(res); err != nil {
		t.Fatalf("ModifyResponse returned %v; it must never fail a response", err)
	}
	body, _ := io.ReadAll(res.Body)
	checkResponse(t, res.StatusCode, string(body))
	return res.Header
}

func serveMutation(t *testing.T, sc scenario) http.Header {
	t.Helper()
	sc.work()
	m := headroom.MutationFor(sc.reader, sc.band)
	h := sc.backendHeader()
	applyAsEnvoy(h, m)
	return h
}

// applyAsEnvoy applies m the way Envoy applies an ext_proc HeaderMutation:
// remove_headers first, matching names without regard to case, then
// set_headers, overwriting.
func applyAsEnvoy(h http.Header, m headroom.Mutation) {
	for _, name := range m.Remove {
		for key := range h {
			if strings.EqualFold(key, name) {
				delete(h, key)
			}
		}
	}
	if m.Set {
		h.Set(headroom.HeaderName, m.Value)
	}
}

func checkResponse(t *testing.T, status int, body string) {
	t.Helper()
	if status != backendStatus || body != backendBody {
		t.Fatalf("response = %d %q, want the backend's %d %q", status, body, backendStatus, backendBody)
	}
}

// headroomValues returns every value h holds under either headroom name, in
// any letter case, keyed by the key that holds it.
func headroomValues(h http.Header) map[string][]string {
	found := map[string][]string{}
	for key, vs := range h {
		if strings.EqualFold(key, headroom.HeaderName) || strings.EqualFold(key, headroom.ProvisionalHeaderName) {
			found[key] = vs
		}
	}
	return found
}

func wantHeadroom(t *testing.T, h http.Header, want string) {
	t.Helper()
	got := headroomValues(h)
	if len(got) != 1 || !slices.Equal(got[http.CanonicalHeaderKey(headroom.HeaderName)], []string{want}) {
		t.Fatalf("headroom headers = %q, want exactly %s: %s", got, headroom.HeaderName, want)
	}
	checkUnrelatedKept(t, h)
	if n, err := headroom.Parse(h); err != nil || strconv.FormatInt(n, 10) != want {
		t.Fatalf("Parse of the stamped header = %d, %v; want %s", n, err, want)
	}
}

func checkUnrelatedKept(t *testing.T, h http.Header) {
	t.Helper()
	if got := h["X-Model"]; !slices.Equal(got, []string{"m1"}) {
		t.Fatalf("the backend's X-Model header became %q, want [m1]", got)
	}
}

func wantAbsent(t *testing.T, h http.Header) {
	t.Helper()
	if got := headroomValues(h); len(got) != 0 {
		t.Fatalf("headroom headers = %q, want none", got)
	}
	checkUnrelatedKept(t, h)
	if _, err := headroom.Parse(h); !errors.Is(err, headroom.ErrAbsent) {
		t.Fatalf("Parse = %v, want ErrAbsent", err)
	}
}

func bounded(priority int, capacityRequests, length int64) capacity.Snapshot {
	return capacity.Snapshot{
		Priority:        priority,
		QueuedRequests:  length,
		RequestCapacity: capacity.Bounded(capacityRequests),
	}
}

func bandsOf(snapshots ...capacity.Snapshot) *capacity.Bands {
	var b capacity.Bands
	for _, s := range snapshots {
		b.Set(s)
	}
	return &b
}

// admit plays the admission step of a router whose bands are r: a request
// for a band that is not provisioned is admitted in the fallback band.
func admit(r capacity.Reader, requested, fallback int) headroom.Band {
	if _, err := r.CapacitySnapshot(requested); errors.Is(err, capacity.ErrBandNotFound) {
		return headroom.Admitted(fallback)
	}
	return headroom.Admitted(requested)
}

func forEachSurface(t *testing.T, run func(t *testing.T, s surface)) {
	for _, s := range surfaces {
		t.Run(s.name, func(t *testing.T) { run(t, s) })
	}
}

func TestNormalDispatch(t *testing.T) {
	forEachSurface(t, func(t *testing.T, s surface) {
		bands := bandsOf(bounded(0, 50, 10), bounded(3, 20, 4))
		band := admit(bands, 3, 0)
		wantHeadroom(t, s.serve(t, scenario{reader: bands, band: band}), "16")
	})
}

func TestPriorityFallback(t *testing.T) {
	forEachSurface(t, func(t *testing.T, s surface) {
		bands := bandsOf(bounded(0, 100, 81))
		band := admit(bands, 5, 0)
		if p, _ := band.Priority(); p != 0 {
			t.Fatalf("request for band 5 admitted in band %d, want the fallback band 0", p)
		}
		h := s.serve(t, scenario{
			reader: bands,
			band:   band,
			// The control plane provisions band 5 while the model works.
			modelWorks: func() { bands.Set(bounded(5, 10, 0)) },
		})
		wantHeadroom(t, h, "19")
		if n, ok := headroom.Sample(bands, headroom.Admitted(5)); !ok || n != 10 {
			t.Fatalf("band 5 reads %d, %t after provisioning; the test needs 10, true", n, ok)
		}
	})
}

// The header is the admitted band's request capacity less its queue, never
// below 0, and absent for an unbounded band.
func TestHeadroomOfTheAdmittedBand(t *testing.T) {
	for _, c := range []struct {
		name string
		band capacity.Snapshot
		want string // "" for no header
	}{
		{"bounded remaining capacity", bounded(0, 100, 81), "19"},
		{"full band", bounded(0, 100, 100), "0"},
		// A band holds more than its capacity after the capacity was lowered.
		{"over-capacity band", bounded(0, 100, 130), "0"},
		{"bounded zero-capacity band", bounded(-1, 0, 0), "0"},
		{"unbounded band", capacity.Snapshot{Priority: 0, QueuedRequests: 81}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			forEachSurface(t, func(t *testing.T, s surface) {
				h := s.serve(t, scenario{reader: bandsOf(c.band), band: headroom.Admitted(c.band.Priority)})
				if c.want == "" {
					wantAbsent(t, h)
				} else {
					wantHeadroom(t, h, c.want)
				}
			})
		})
	}
}

func TestMissingBand(t *testing.T) {
	// The band was deleted between admission and response.
	forEachSurface(t, func(t *testing.T, s surface) {
		bands := bandsOf(bounded(0, 100, 81), bounded(7, 100, 1))
		h := s.serve(t, scenario{
			reader:     bands,
			band:       headroom.Admitted(7),
			modelWorks: func() { bands.Delete(7) },
		})
		wantAbsent(t, h)
	})
}

func TestSnapshotError(t *testing.T) {
	// serve checks that the response keeps the backend's status and body.
	forEachSurface(t, func(t *testing.T, s surface) {
		failing := capacity.ReaderFunc(func(int) (capacity.Snapshot, error) {
			return bounded(0, 100, 81), errors.New("registry unavailable")
		})
		wantAbsent(t, s.serve(t, scenario{reader: failing, band: headroom.Admitted(0)}))
	})
}

// A Reader that panics — here a nil ReaderFunc, the kind of wiring mistake a
// typed nil pointer also makes — is a failed read: the response keeps its
// status and body, without the header.
func TestPanickingReader(t *testing.T) {
	forEachSurface(t, func(t *testing.T, s surface) {
		var nilFunc capacity.ReaderFunc
		wantAbsent(t, s.serve(t, scenario{reader: nilFunc, band: headroom.Admitted(0)}))
	})
}

func TestNotAdmitted(t *testing.T) {
	// Band 0 exists and is bounded: only the missing admission hides it.
	forEachSurface(t, func(t *testing.T, s surface) {
		bands := bandsOf(bounded(0, 100, 81))
		wantAbsent(t, s.serve(t, scenario{reader: bands, band: headroom.Band{}}))
	})
}

func TestNoReader(t *testing.T) {
	forEachSurface(t, func(t *testing.T, s surface) {
		wantAbsent(t, s.serve(t, scenario{reader: nil, band: headroom.Admitted(0)}))
	})
}

func TestBackendCopiesRemoved(t *testing.T) {
	forms := []struct {
		name    string
		backend http.Header
	}{
		{"canonical key", http.Header{canonical: {"999"}}},
		{"lower-case key set in the map", http.Header{headroom.HeaderName: {"999"}}},
		{"upper-case key set in the map", http.Header{strings.ToUpper(headroom.HeaderName): {"999"}}},
		{"mixed-case key set in the map", http.Header{"x-LLM-d-Flow-band-HEADROOM-requests": {"999"}}},
		{"several values", http.Header{canonical: {"999", "1000"}}},
		{"several keys", http.Header{
			canonical:                             {"1"},
			headroom.HeaderName:                   {"2", "3"},
			"X-LLM-D-FLOW-BAND-HEADROOM-REQUESTS": {"4"},
		}},
		{"empty value", http.Header{canonical: {""}}},
		{"provisional name", http.Header{provisional: {"999"}}},
		{"provisional name, lower case, several values", http.Header{headroom.ProvisionalHeaderName: {"7", "8"}}},
		{"both names", http.Header{canonical: {"1"}, provisional: {"2"}}},
	}
	for _, form := range forms {
		t.Run(form.name, func(t *testing.T) {
			form.backend["X-Model"] = []string{"m1"}
			forEachSurface(t, func(t *testing.T, s surface) {
				t.Run("replaced", func(t *testing.T) {
					bands := bandsOf(bounded(0, 100, 81))
					h := s.serve(t, scenario{reader: bands, band: headroom.Admitted(0), backend: form.backend})
					wantHeadroom(t, h, "19")
				})
				t.Run("removed", func(t *testing.T) {
					bands := bandsOf(capacity.Snapshot{Priority: 0})
					h := s.serve(t, scenario{reader: bands, band: headroom.Admitted(0), backend: form.backend})
					wantAbsent(t, h)
				})
			})
		})
	}
}

func TestResponseTimeSampling(t *testing.T) {
	forEachSurface(t, func(t *testing.T, s surface) {
		bands := bandsOf(bounded(0, 100, 81))
		band := headroom.Admitted(0)
		if n, _ := headroom.Sample(bands, band); n != 19 {
			t.Fatalf("headroom at admission = %d, want 19", n)
		}
		h := s.serve(t, scenario{
			reader: bands,
			band:   band,
			// Fifteen more requests queue while the model works.
			modelWorks: func() {
				bands.Update(0, func(s *capacity.Snapshot) { s.QueuedRequests += 15 })
			},
		})
		wantHeadroom(t, h, "4")
	})
}

func TestBandContext(t *testing.T) {
	ctx := context.Background()
	if b := headroom.FromContext(ctx); b != (headroom.Band{}) {
		t.Fatalf("FromContext of a bare context = %v, want not admitted", b)
	}
	if _, admitted := headroom.FromContext(ctx).Priority(); admitted {
		t.Fatal("a bare context reports admission")
	}
	for _, p := range []int{0, 5, -3} {
		b := headroom.FromContext(headroom.NewContext(ctx, headroom.Admitted(p)))
		if got, admitted := b.Priority(); got != p || !admitted {
			t.Errorf("after NewContext(Admitted(%d)): Priority() = %d, %t", p, got, admitted)
		}
		if b != headroom.Admitted(p) {
			t.Errorf("after NewContext(Admitted(%d)): %v, want %v", p, b, headroom.Admitted(p))
		}
	}
	// Admission in band 0 is not the zero Band.
	if headroom.Admitted(0) == (headroom.Band{}) {
		t.Fatal("Admitted(0) equals the zero Band")
	}
}

func TestBandString(t *testing.T) {
	for b, want := range map[headroom.Band]string{
		{}:                    "not admitted",
		headroom.Admitted(0):  "band 0",
		headroom.Admitted(-2): "band -2",
	} {
		if got := b.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}

func TestFromSnapshot(t *testing.T) {
	tests := []struct {
		name      string
		s         capacity.Snapshot
		want      int64
		wantKnown bool
	}{
		{"bounded", bounded(0, 100, 81), 19, true},
		{"full", bounded(0, 100, 100), 0, true},
		{"over capacity", bounded(0, 100, 101), 0, true},
		{"zero capacity", bounded(0, 0, 0), 0, true},
		{"negative capacity", bounded(0, -5, 0), 0, true},
		{"unbounded", capacity.Snapshot{QueuedRequests: 3}, 0, false},
		{"zero snapshot", capacity.Snapshot{}, 0, false},
		{"byte capacity alone", capacity.Snapshot{ByteCapacity: capacity.Bounded(10)}, 0, false},
	}
	for _, tt := range tests {
		got, known := headroom.FromSnapshot(tt.s)
		if got != tt.want || known != tt.wantKnown {
			t.Errorf("%s: FromSnapshot(%v) = %d, %t; want %d, %t", tt.name, tt.s, got, known, tt.want, tt.wantKnown)
		}
	}
}

func TestSampleReadsOnlyTheAdmittedBand(t *testing.T) {
	var asked []int
	r := capacity.ReaderFunc(func(p int) (capacity.Snapshot, error) {
		asked = append(asked, p)
		return bounded(p, 10, 3), nil
	})
	if _, ok := headroom.Sample(r, headroom.Band{}); ok {
		t.Fatal("Sample advertised a request that was not admitted")
	}
	if len(asked) != 0 {
		t.Fatalf("Sample read bands %v for a request that was not admitted", asked)
	}
	if n, ok := headroom.Sample(r, headroom.Admitted(4)); n != 7 || !ok {
		t.Fatalf("Sample = %d, %t; want 7, true", n, ok)
	}
	if !slices.Equal(asked, []int{4}) {
		t.Fatalf("Sample read bands %v, want [4]", asked)
	}
}

func TestSampleNilBands(t *testing.T) {
	var nilBands *capacity.Bands
	if _, ok := headroom.Sample(nilBands, headroom.Admitted(0)); ok {
		t.Fatal("Sample advertised from a nil *capacity.Bands")
	}
}
