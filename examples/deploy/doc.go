// Module deploy holds what it takes to run Sluice in front of vLLM: the
// pieces with dependencies the core module does not take — Prometheus
// metrics ([github.com/sluicegate/sluice/examples/deploy/metrics]), a vLLM
// metrics source ([github.com/sluicegate/sluice/examples/deploy/vllm]),
// configuration from a YAML file
// ([github.com/sluicegate/sluice/examples/deploy/config]), health probes
// ([github.com/sluicegate/sluice/examples/deploy/probe]) — and the
// sluice-gateway binary that puts them together. It holds no code itself.
package deploy
