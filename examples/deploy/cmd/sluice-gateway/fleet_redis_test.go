package main

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicegate/sluice/examples/deploy/redisfleet"
	"github.com/sluicegate/sluice/examples/modelserver"
)

// The fleet under test: three replicas sharing a budget of 6 in flight and
// a band of 60 waiting, syncing every 50 ms, leases of 300 ms.
const (
	fleetBudget   = 6
	fleetQueue    = 60
	fleetReplicas = 3
	fleetPeriod   = 50 * time.Millisecond
	fleetLease    = 300 * time.Millisecond
	// The overload: wave requests at each replica every waveEvery.
	wave      = 2
	waveEvery = 20 * time.Millisecond
)

const fleetConfig = `
gateway:
  gracePeriod: 10s
  drainDelay: 0s
controller:
  bands:
    - priority: 0
      maxRequests: 60
gate:
  maxInFlight: 6
`

// redisServer is a redis-server child process on loopback, without
// persistence: stopping it loses every key, as a restart would.
type redisServer struct {
	bin, addr string
	cmd       *exec.Cmd
	exited    chan struct{}
}

func startRedis(t *testing.T, bin, addr string) *redisServer {
	t.Helper()
	_, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--protected-mode", "yes")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &redisServer{bin: bin, addr: addr, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(r.exited) }()
	t.Cleanup(r.stop)
	client := redisfleet.NewClient(addr, "", time.Second)
	defer client.Close()
	waitFor(t, "redis-server to answer", func() bool {
		select {
		case <-r.exited:
			t.Fatalf("redis-server exited at start (is %s taken?)", addr)
		default:
		}
		return client.Ping(context.Background()).Err() == nil
	})
	return r
}

// stop kills the server, at once, and waits for it to exit.
func (r *redisServer) stop() {
	select {
	case <-r.exited:
		return
	default:
	}
	_ = r.cmd.Process.Kill()
	<-r.exited
}

// fleetQueued returns the requests waiting in the fleet, summed from the
// replicas' /metrics (llm_d_epp_flow_control_queue_size, every series).
func fleetQueued(t *testing.T, client *http.Client, ps []*proc) int {
	t.Helper()
	total := 0
	for _, p := range ps {
		_, page := get(t, client, p.url+"/metrics")
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(page))
		if err != nil {
			t.Fatalf("%s/metrics: %v", p.url, err)
		}
		if f := fams["llm_d_epp_flow_control_queue_size"]; f != nil {
			for _, m := range f.GetMetric() {
				total += int(m.GetGauge().GetValue())
			}
		}
	}
	return total
}

func fleetReadyz(t *testing.T, client *http.Client, p *proc) (int, string) {
	t.Helper()
	return get(t, client, p.url+"/readyz")
}

// TestFleetOnRedis runs three sluice-gateway processes sharing one
// redis-server on loopback in front of a simulated model server: under a
// bounded overload the fleet keeps within its budget and its band's
// capacity (the stated bound); stopping Redis moves every replica to its
// static share with no request lost, and its return brings them back;
// killing a replica returns its share within the lease.
func TestFleetOnRedis(t *testing.T) {
	const require = "SLUICE_REQUIRE_REDIS"
	redisBin := requireTool(t, require, "redis-server")
	bin := buildGateway(t)
	redis := startRedis(t, redisBin, freeLoopbackAddr(t))
	urls, servers := modelServers(t, 1, modelserver.Config{Slots: 64, DecodeStep: 100 * time.Millisecond})
	ms := servers[0]
	path := writeConfig(t, "", fleetConfig)
	var ps []*proc
	ids := map[*proc]string{}
	for i := range fleetReplicas {
		ps = append(ps, startProcess(t, bin, nil, "-config", path, "-listen", "127.0.0.1:0",
			"-backend", urls[0].String(), "-fleet-redis", redis.addr, "-fleet-id", fmt.Sprintf("gw-%d", i),
			"-fleet-replicas", strconv.Itoa(fleetReplicas), "-fleet-period", fleetPeriod.String(),
			"-fleet-lease", fleetLease.String(), "-fleet-prefix", "test-fleet"))
		ids[ps[i]] = fmt.Sprintf("gw-%d", i)
	}
	client := newClient(t)
	synced := func(p *proc) bool {
		code, body := fleetReadyz(t, client, p)
		return code == http.StatusOK && strings.TrimSpace(body) == "ready" &&
			p.metric(t, client, `sluice_gateway_fleet_replicas_live`) == strconv.Itoa(len(ps))
	}
	for _, p := range ps {
		waitFor(t, p.url+" to sync with the fleet", func() bool { return synced(p) })
	}

	// A bounded overload: 300 requests, 2 at a time at each replica
	// every 20 ms, ten times what the budget serves. Every request is
	// answered 200 or 429; the fleet's in flight and queued stay within
	// the promise: C + what the others admitted within a round, and Q +
	// what arrived within a round (the states a round reads are up to a
	// period and a Redis round trip old: 2P = 100 ms is 5 waves of 6).
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		lost     []string
	)
	var wg sync.WaitGroup
	overload := func(rounds int) {
		for round := range rounds {
			for i, p := range ps {
				for k := range wave {
					wg.Go(func() {
						r := <-send(client, p.url, fmt.Sprintf("r%d-g%d-%d", round, i, k))
						mu.Lock()
						defer mu.Unlock()
						statuses[r.status]++
						if r.err != nil || (r.status != http.StatusOK && r.status != http.StatusTooManyRequests) {
							lost = append(lost, fmt.Sprintf("%d %v %q", r.status, r.err, r.body))
						}
					})
				}
			}
			time.Sleep(waveEvery) // pacing the load, not a wait for a state
		}
	}
	// The onset of the burst is apart: every replica's last read showed
	// an idle fleet, and each may take up to the whole budget before the
	// others' admissions reach it (the promise's Σ a_j(2P+δ) term).
	// Steady is from settle after the first wave on.
	const settle = 500 * time.Millisecond
	onsetRunning, maxRunning, maxQueued := 0, 0, 0
	began := time.Now()
	sampling, stopSampling := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampling.Err() == nil {
			l := ms.Load()
			if time.Since(began) < settle {
				onsetRunning = max(onsetRunning, l.Running+l.Waiting)
			} else {
				maxRunning = max(maxRunning, l.Running+l.Waiting)
			}
			maxQueued = max(maxQueued, fleetQueued(t, client, ps))
			time.Sleep(10 * time.Millisecond)
		}
	}()
	overload(50)
	wg.Wait()
	stopSampling()
	<-sampled
	t.Logf("overload: statuses %v; the fleet's most in flight %d at the onset, %d after (budget %d), most queued %d (capacity %d)",
		statuses, onsetRunning, maxRunning, fleetBudget, maxQueued, fleetQueue)
	if len(lost) > 0 {
		t.Fatalf("%d requests lost under overload, first %s", len(lost), lost[0])
	}
	if statuses[http.StatusOK] == 0 || statuses[http.StatusTooManyRequests] == 0 {
		t.Fatalf("statuses %v: want both served and refused requests under overload", statuses)
	}
	// Once every replica has read the others busy, the fleet keeps within
	// its budget but for the admissions of a round: a replica's static
	// share of slack. (At the onset it may reach R·C, the promise's
	// Σ a_j(2P+δ) with every other replica admitting its whole share;
	// logged above.)
	if within := fleetBudget + fleetBudget/fleetReplicas; maxRunning > within {
		t.Errorf("the fleet ran %d at once after the onset, over its budget %d plus a round's slack (%d)", maxRunning, fleetBudget, within)
	}
	if maxRunning < fleetBudget {
		t.Errorf("the fleet ran at most %d at once after the onset: the overload did not fill the budget %d", maxRunning, fleetBudget)
	}
	roundArrivals := int(2*fleetPeriod/waveEvery) * wave * fleetReplicas
	if maxQueued > fleetQueue+roundArrivals {
		t.Errorf("the fleet queued %d, over its capacity %d plus one round's arrivals (%d)", maxQueued, fleetQueue, roundArrivals)
	}
	if maxQueued <= fleetQueue/2 {
		t.Errorf("the fleet queued at most %d: the overload did not fill the band (%d)", maxQueued, fleetQueue)
	}

	// Redis stops mid-run: every replica falls back, says so, and loses
	// nothing.
	clear(statuses)
	redis.stop()
	overloaded := make(chan struct{})
	go func() { overload(25); close(overloaded) }()
	for _, p := range ps {
		waitFor(t, p.url+" to fall back", func() bool {
			code, body := fleetReadyz(t, client, p)
			return code == http.StatusOK && strings.Contains(body, "fleet fallback (stale)") &&
				p.metric(t, client, `sluice_gateway_fleet_fallback{reason="stale"}`) == "1" &&
				p.metric(t, client, `sluice_gateway_fleet_share{replica="`+ids[p]+`"}`) == strconv.Itoa(fleetBudget/fleetReplicas)
		})
	}
	<-overloaded
	wg.Wait()
	t.Logf("with Redis down: statuses %v", statuses)
	if len(lost) > 0 {
		t.Fatalf("%d requests lost with Redis down, first %s", len(lost), lost[0])
	}
	if statuses[http.StatusOK] == 0 {
		t.Fatalf("statuses %v: want requests served in fallback", statuses)
	}

	// Redis returns, empty: the fleet rebuilds and syncs.
	redis = startRedis(t, redisBin, redis.addr)
	for _, p := range ps {
		waitFor(t, p.url+" to sync again after Redis returned", func() bool { return synced(p) })
	}
	rc := redisfleet.NewClient(redis.addr, "", time.Second)
	defer rc.Close()
	if n, err := rc.ZCard(context.Background(), "test-fleet:idx").Result(); err != nil || n != fleetReplicas {
		t.Errorf("the restarted Redis indexes %d replicas (%v), want the %d rebuilt", n, err, fleetReplicas)
	}

	// A replica killed without warning: the others drop it from their
	// view once its state is Lease + MaxSkew (a period) old, at the next
	// round — the promise, checked with a second of slack for a loaded
	// host — and then share the whole budget between them.
	killed := time.Now()
	ps[2].signal(t, syscall.SIGKILL)
	ps[2].wait(t)
	rest := ps[:2]
	waitFor(t, "the others to drop the killed replica", func() bool {
		for _, p := range rest {
			if p.metric(t, client, `sluice_gateway_fleet_replicas_live`) != "2" {
				return false
			}
		}
		return true
	})
	dropped := time.Since(killed)
	if within := fleetLease + 2*fleetPeriod + time.Second; dropped > within {
		t.Errorf("the killed replica was dropped from the view after %v, want within %v", dropped, within)
	}
	waitFor(t, "the others to take the killed replica's share", func() bool {
		total := 0
		for _, p := range rest {
			n, _ := strconv.Atoi(p.metric(t, client, `sluice_gateway_fleet_share{replica="`+ids[p]+`"}`))
			total += n
		}
		return total == fleetBudget
	})
	t.Logf("the killed replica was dropped after %v and its share taken after %v (lease %v)", dropped, time.Since(killed), fleetLease)
}
