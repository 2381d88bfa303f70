package config_test

import (
	"errors"
	"fmt"

	"github.com/sluicegate/sluice/examples/deploy/config"
	"github.com/sluicegate/sluice/flowcontrol"
)

func Example() {
	f, err := config.Parse([]byte(`
gateway:
  backends: [http://127.0.0.1:8000, http://127.0.0.1:8001]
controller:
  maxBytes: 256Mi
  defaultTTL: 30s
  bands:
  - priority: 10
    maxRequests: 100
    ordering: slo-deadline-ordering-policy
  - priority: 0
    maxRequests: 1k
    fairness: round-robin-fairness-policy
gate:
  maxInFlight: 64
  saturation:
    queueDepthThreshold: 8
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg, gates, err := f.Controller(config.BuildOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := flowcontrol.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	fmt.Println("listen:", f.Gateway.Listen, "backends:", len(f.Gateway.Backends))
	fmt.Println("bytes:", cfg.ByteCapacity, "ttl:", cfg.DefaultTTL)
	for _, b := range cfg.Bands {
		fmt.Printf("band %d: %s requests\n", b.Priority, b.RequestCapacity)
	}
	// The binary feeds the saturation gate each backend's metrics.
	fmt.Println("saturation gate:", gates.Saturation != nil)
	// Output:
	// listen: 127.0.0.1:8080 backends: 2
	// bytes: 268435456 ttl: 30s
	// band 10: 100 requests
	// band 0: 1000 requests
	// saturation gate: true
}

// An llm-d-router EndpointPickerConfig loads as it is: its flowControl
// section becomes the controller's bands, with llm-d-router's defaults,
// and its saturation detector the gate.
func ExampleParse_llmd() {
	f, err := config.Parse([]byte(`
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates: [flowControl]
plugins:
- type: queue-scorer
- name: fair
  type: round-robin-fairness-policy
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
flowControl:
  maxRequests: "2k"
  priorityBands:
  - priority: 100
    maxRequests: "400"
    fairnessPolicyRef: fair
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("form:", f.Form, "ttl:", f.Flow.DefaultTTL, "requests:", f.Flow.RequestCapacity)
	for _, b := range f.Flow.Bands {
		fmt.Printf("band %d: %s requests, %s, %s\n", b.Priority, b.RequestCapacity, b.Policy.TypeName(), b.Fairness.TypeName())
	}
	fmt.Printf("gate: queue depth %d, KV cache %.1f\n", f.Gate.Saturation.QueueDepthThreshold, f.Gate.Saturation.KVCacheUtilThreshold)
	// Output:
	// form: llm-d ttl: 1m0s requests: 2000
	// band 100: 400 requests, fcfs-ordering-policy, round-robin-fairness-policy
	// band 0: 5000 requests, fcfs-ordering-policy, global-strict-fairness-policy
	// gate: queue depth 5, KV cache 0.8
}

// Every problem names its place in the file.
func ExampleError() {
	_, err := config.Parse([]byte(`
flowControl:
  priorityBands:
  - priority: 10
    maxRequest: "500"
    orderingPolicyRef: lifo
`))
	fmt.Println(err)
	var e *config.Error
	if errors.As(err, &e) {
		fmt.Println(e.Line, e.Path)
	}
	// Output:
	// config: line 5, column 5: flowControl.priorityBands[0].maxRequest: unknown key (did you mean "maxRequests"?)
	// config: line 6, column 24: flowControl.priorityBands[0].orderingPolicyRef: no plugin named "lifo" and no ordering policy of that type (known types: fcfs-ordering-policy, edf-ordering-policy, slo-deadline-ordering-policy)
	// 5 flowControl.priorityBands[0].maxRequest
}
