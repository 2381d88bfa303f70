package main

import (
	"strings"
	"testing"
)

// want is the complete, deterministic output of the demo.
const want = `arrival  request          SLO headers                                     slo-deadline reads
+0ms     no-header        (none)                                          no SLO: after every deadline
+1ms     loose            x-llm-d-slo-ttft-ms: "5000"                     deadline +5001ms
+2ms     tight            x-llm-d-slo-ttft-ms: "100"                      deadline +102ms
+3ms     empty            x-llm-d-slo-ttft-ms: ""                         empty: no SLO
+4ms     alias-only       x-slo-ttft-ms: "300"                            deprecated name read: deadline +304ms
+5ms     invalid          x-llm-d-slo-ttft-ms: "fast"                     not an integer: no SLO
+6ms     new-beats-alias  x-llm-d-slo-ttft-ms: "-5", x-slo-ttft-ms: "10"  new name present but negative: no SLO
+7ms     urgent           X-LLM-D-SLO-TTFT-MS: " 20 "                     any case, spaces trimmed: deadline +27ms
+8ms     huge             x-llm-d-slo-ttft-ms: "9223372036854"            largest valid SLO: still before no-SLO
+9ms     tight-later      x-llm-d-slo-ttft-ms: "95"                       deadline +104ms

dispatch  fcfs-ordering-policy  slo-deadline-ordering-policy
1         no-header             urgent
2         loose                 tight
3         tight                 tight-later
4         empty                 alias-only
5         alias-only            loose
6         invalid               huge
7         new-beats-alias       no-header
8         urgent                empty
9         huge                  invalid
10        tight-later           new-beats-alias
`

func TestRunOutput(t *testing.T) {
	var b strings.Builder
	if err := run(&b); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != want {
		t.Fatalf("output changed:\n%s\nwant:\n%s", got, want)
	}
}
