// Command ordering prints the dispatch order of one fixed set of requests
// under the FCFS and the slo-deadline ordering policies, side by side.
//
//	go run ./examples/ordering
//
// The requests carry tight, loose, missing, empty, invalid and alias-only
// time-to-first-token objectives, so the output shows every rule of the
// slo-deadline policy: the earliest deadline leaves first, and a request
// without a valid objective waits behind every request with one, in arrival
// order.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicegate/sluice/ordering"
)

// request is one demo request: a name, the headers it arrives with, and what
// the slo-deadline policy makes of them.
type request struct {
	name    string
	headers [][2]string // name, value
	meaning string
}

// requests arrive one millisecond apart, in this order.
var requests = []request{
	{"no-header", nil, "no SLO: after every deadline"},
	{"loose", [][2]string{{"x-llm-d-slo-ttft-ms", "5000"}}, "deadline +5001ms"},
	{"tight", [][2]string{{"x-llm-d-slo-ttft-ms", "100"}}, "deadline +102ms"},
	{"empty", [][2]string{{"x-llm-d-slo-ttft-ms", ""}}, "empty: no SLO"},
	{"alias-only", [][2]string{{"x-slo-ttft-ms", "300"}}, "deprecated name read: deadline +304ms"},
	{"invalid", [][2]string{{"x-llm-d-slo-ttft-ms", "fast"}}, "not an integer: no SLO"},
	{"new-beats-alias", [][2]string{{"x-llm-d-slo-ttft-ms", "-5"}, {"x-slo-ttft-ms", "10"}}, "new name present but negative: no SLO"},
	{"urgent", [][2]string{{"X-LLM-D-SLO-TTFT-MS", " 20 "}}, "any case, spaces trimmed: deadline +27ms"},
	{"huge", [][2]string{{"x-llm-d-slo-ttft-ms", "9223372036854"}}, "largest valid SLO: still before no-SLO"},
	{"tight-later", [][2]string{{"x-llm-d-slo-ttft-ms", "95"}}, "deadline +104ms"},
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run writes the request table and the two dispatch orders to w.
func run(w io.Writer) error {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	policies := []ordering.Policy{ordering.FCFS(), ordering.SLODeadline()}
	orders := make([][]*ordering.Item, len(policies))
	for i, p := range policies {
		q, err := ordering.NewQueue(ordering.DefaultQueueKind(p), p)
		if err != nil {
			return err
		}
		for j, r := range requests {
			at := start.Add(time.Duration(j) * time.Millisecond)
			h := http.Header{}
			for _, kv := range r.headers {
				h[kv[0]] = append(h[kv[0]], kv[1]) // as sent: names not canonicalized
			}
			q.Add(&ordering.Item{ReceivedTime: at, EnqueueTime: at, Header: h, Value: r.name})
		}
		orders[i] = q.Drain()
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "arrival\trequest\tSLO headers\tslo-deadline reads")
	for j, r := range requests {
		fmt.Fprintf(tw, "+%dms\t%s\t%s\t%s\n", j, r.name, formatHeaders(r.headers), r.meaning)
	}
	fmt.Fprintln(tw)
	fmt.Fprint(tw, "dispatch")
	for _, p := range policies {
		fmt.Fprintf(tw, "\t%s", p.TypeName())
	}
	fmt.Fprintln(tw)
	for k := range requests {
		fmt.Fprintf(tw, "%d", k+1)
		for i := range policies {
			fmt.Fprintf(tw, "\t%s", orders[i][k].Value)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func formatHeaders(headers [][2]string) string {
	if len(headers) == 0 {
		return "(none)"
	}
	parts := make([]string, len(headers))
	for i, kv := range headers {
		parts[i] = fmt.Sprintf("%s: %q", kv[0], kv[1])
	}
	return strings.Join(parts, ", ")
}
