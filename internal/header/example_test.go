package header_test

import (
	"fmt"
	"net/http"

	"github.com/sluicegate/sluice/internal/header"
)

// A header map filled by hand may hold one header under several spellings;
// Value answers the same whatever the map's order.
func ExampleValue() {
	h := http.Header{"x-llm-d-slo-ttft-ms": {"250"}, "X-LLM-D-SLO-TTFT-MS": {"500"}}
	v, ok := header.Value(h, "X-Llm-D-Slo-Ttft-Ms")
	fmt.Println(v, ok)
	h["X-Llm-D-Slo-Ttft-Ms"] = []string{"100"}
	fmt.Println(header.Value(h, "X-Llm-D-Slo-Ttft-Ms"))
	fmt.Println(header.EqualFold("Trailer", "TRAILER"))
	// Output:
	// 500 true
	// 100 true
	// true
}
