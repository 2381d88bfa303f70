package redisfleet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegate/sluice/flowcontrol/fleet"
)

// Syncer shares opaque values between the replicas of a router on the same
// Redis, under the same discipline as [Store]: each replica publishes its
// own value under a lease timed on Redis's clock, a read returns the live
// replicas' values and nothing else, and everything read back is bounded
// before it leaves Redis. Where a Store carries Sluice's flow-control state,
// a Syncer carries whatever a router's plugins share per key and endpoint,
// which is the shape of llm-d-router's CrossReplicaSyncer plugin seam:
//
//   - its Set(key, endpoint, value), called once a period per live endpoint,
//     is [Syncer.Set] with the value encoded (JSON, say);
//   - its Get(key, endpoint, aggregate) is [Syncer.Get], each value decoded,
//     then folded by aggregate; no live value is its miss;
//   - its Delete is [Syncer.Delete];
//   - its GetOrSet, request-level state settled once for the whole fleet,
//     is [Syncer.GetOrSet], one atomic script on one primary.
//
// So one Redis, one prefix scheme and one lease serve both Sluice's fleet
// view and such plugins, and a replica killed without warning leaves
// neither: its values expire with its lease. A Syncer is safe for
// concurrent use.
type Syncer struct {
	client   redis.Scripter
	prefix   string
	replica  string
	lease    time.Duration
	timeout  time.Duration
	maxValue int
	dropped  atomic.Int64
}

// Dropped returns how many values Gets have left out as longer than
// MaxValueBytes since the syncer was made.
func (s *Syncer) Dropped() int64 { return s.dropped.Load() }

// SyncerOptions configures a [Syncer].
type SyncerOptions struct {
	// Prefix starts every key the syncer uses; DefaultPrefix if empty. A
	// Store and a Syncer may share one: their keys do not collide.
	Prefix string
	// Replica names this replica, as fleet.Replica.ID does: 1 to
	// fleet.MaxIDLength bytes of printable UTF-8. Required.
	Replica string
	// Lease is how long a value Set stays after its last Set; at least a
	// millisecond. Required.
	Lease time.Duration
	// Timeout bounds each call; DefaultTimeout if zero.
	Timeout time.Duration
	// MaxValueBytes is the longest value Set stores and Get returns;
	// DefaultMaxValueBytes if zero, at most 1 MiB. A longer value found
	// in Redis is left there, never sent.
	MaxValueBytes int
}

// MaxSyncKeyLength bounds a Syncer's key, endpoint and GetOrSet ID.
const MaxSyncKeyLength = 512

// NewSyncer returns a syncer on client's Redis. It checks opts and names
// the field it refuses; it does not contact Redis.
func NewSyncer(client redis.Scripter, opts SyncerOptions) (*Syncer, error) {
	if client == nil {
		return nil, errors.New("redisfleet: nil client")
	}
	if err := (fleet.Replica{ID: opts.Replica, At: time.Unix(1, 0)}).Check(); err != nil {
		return nil, fmt.Errorf("redisfleet: SyncerOptions.Replica %q: want 1 to %d bytes of printable UTF-8", opts.Replica, fleet.MaxIDLength)
	}
	if opts.Lease < time.Millisecond {
		return nil, fmt.Errorf("redisfleet: SyncerOptions.Lease %v: want at least 1ms", opts.Lease)
	}
	if err := shared("SyncerOptions", &opts.Prefix, &opts.Timeout, &opts.MaxValueBytes); err != nil {
		return nil, err
	}
	return &Syncer{client: client, prefix: opts.Prefix, replica: opts.Replica, lease: opts.Lease,
		timeout: opts.Timeout, maxValue: opts.MaxValueBytes}, nil
}

// hashKey is the hash that holds every replica's value for key and
// endpoint: P:s:<len(key)>:<key>:<endpoint>, so that no two pairs share
// one whatever bytes they hold.
func (s *Syncer) hashKey(key, endpoint string) string {
	return s.prefix + ":s:" + strconv.Itoa(len(key)) + ":" + key + ":" + endpoint
}

// onceKey is GetOrSet's key for key and id, built as hashKey is.
func (s *Syncer) onceKey(key, id string) string {
	return s.prefix + ":g:" + strconv.Itoa(len(key)) + ":" + key + ":" + id
}

func checkSyncKey(what, v string) error {
	if v == "" || len(v) > MaxSyncKeyLength {
		return fmt.Errorf("redisfleet: %s of %d bytes, want 1 to %d", what, len(v), MaxSyncKeyLength)
	}
	return nil
}

// checkPair checks a key and an endpoint.
func checkPair(key, endpoint string) error {
	if err := checkSyncKey("key", key); err != nil {
		return err
	}
	return checkSyncKey("endpoint", endpoint)
}

// syncSetScript stores this replica's value with its lease end (on
// Redis's clock) in front, and keeps the hash at least as long as it.
//
// KEYS[1] the hash; ARGV[1] the replica, ARGV[2] the value, ARGV[3] the
// lease in ms, ARGV[4] the most replicas a hash keeps.
var syncSetScript = redis.NewScript(`
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    local ends = tonumber(string.match(all[i + 1], '^(%d+):'))
    if not ends or ends <= now then redis.call('HDEL', KEYS[1], all[i]) end
  end
  if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then
    return redis.error_reply('FLEETFULL the key holds the most replicas it keeps')
  end
end
redis.call('HSET', KEYS[1], ARGV[1], tostring(now + lease) .. ':' .. ARGV[2])
if redis.call('PTTL', KEYS[1]) < lease then
  redis.call('PEXPIRE', KEYS[1], lease)
end
return 1
`)

// syncGetScript returns the live replicas' values, at most ARGV[1] of
// them, each at most ARGV[2] bytes (a longer one returns as the number 1),
// and deletes the expired ones.
//
// KEYS[1] the hash.
var syncGetScript = redis.NewScript(`
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  local ends, v = string.match(all[i + 1], '^(%d+):(.*)$')
  if not ends or tonumber(ends) <= now then
    redis.call('HDEL', KEYS[1], all[i])
  elseif #out < 2 * tonumber(ARGV[1]) then
    out[#out + 1] = all[i]
    if string.len(v) > tonumber(ARGV[2]) then
      out[#out + 1] = 1
    else
      out[#out + 1] = v
    end
  end
end
return out
`)

// syncDeleteScript removes ARGV[1]'s value from the hash KEYS[1].
var syncDeleteScript = redis.NewScript(`return redis.call('HDEL', KEYS[1], ARGV[1])`)

// syncOnceScript returns the value stored under KEYS[1], or stores ARGV[1]
// there for ARGV[2] ms and returns it; the first element says which (1:
// it existed). A stored value over ARGV[3] bytes returns as the number 1.
var syncOnceScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then
  if string.len(v) > tonumber(ARGV[3]) then return {1, 1} end
  return {1, v}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
return {0, ARGV[1]}
`)

// Set publishes this replica's value for key and endpoint, for the lease.
// It refuses an empty or overlong key or endpoint, a value over
// MaxValueBytes, and a new replica where fleet.MaxReplicas already hold
// live values.
func (s *Syncer) Set(ctx context.Context, key, endpoint string, value []byte) error {
	if err := checkPair(key, endpoint); err != nil {
		return err
	}
	if len(value) > s.maxValue {
		return fmt.Errorf("redisfleet: value of %d bytes, over %d", len(value), s.maxValue)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := syncSetScript.Run(ctx, s.client, []string{s.hashKey(key, endpoint)},
		s.replica, value, s.lease.Milliseconds(), fleet.MaxReplicas).Err()
	if err != nil {
		return fmt.Errorf("redisfleet: set %s/%s: %w", key, endpoint, err)
	}
	return nil
}

// SyncValue is one replica's live value, as [Syncer.Get] returns it.
type SyncValue struct {
	Replica string
	Value   []byte
}

// Get returns every live replica's value for key and endpoint, this
// replica's included, in no set order; none is a miss. It returns at most
// fleet.MaxReplicas values; a value longer than MaxValueBytes stays in
// Redis and is counted by [Syncer.Dropped], and a reply of another shape
// is an error: nothing unbounded leaves Redis.
func (s *Syncer) Get(ctx context.Context, key, endpoint string) ([]SyncValue, error) {
	if err := checkPair(key, endpoint); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	reply, err := syncGetScript.Run(ctx, s.client, []string{s.hashKey(key, endpoint)},
		fleet.MaxReplicas, s.maxValue).Slice()
	if err != nil {
		return nil, fmt.Errorf("redisfleet: get %s/%s: %w", key, endpoint, err)
	}
	if len(reply)%2 != 0 || len(reply) > 2*fleet.MaxReplicas {
		return nil, fmt.Errorf("redisfleet: get %s/%s: a reply of %d elements, want pairs of at most %d", key, endpoint, len(reply), fleet.MaxReplicas)
	}
	out := make([]SyncValue, 0, len(reply)/2)
	for i := 0; i < len(reply); i += 2 {
		replica, ok := reply[i].(string)
		if !ok || len(replica) > fleet.MaxIDLength {
			return nil, fmt.Errorf("redisfleet: get %s/%s: a replica name of type %T or over %d bytes", key, endpoint, reply[i], fleet.MaxIDLength)
		}
		v, ok := reply[i+1].(string)
		if !ok {
			// Withheld in Redis: over MaxValueBytes. Only that replica's
			// value is lost.
			s.dropped.Add(1)
			continue
		}
		out = append(out, SyncValue{Replica: replica, Value: []byte(v)})
	}
	return out, nil
}

// Delete removes this replica's value for key and endpoint.
func (s *Syncer) Delete(ctx context.Context, key, endpoint string) error {
	if err := checkPair(key, endpoint); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := syncDeleteScript.Run(ctx, s.client, []string{s.hashKey(key, endpoint)}, s.replica).Err(); err != nil {
		return fmt.Errorf("redisfleet: delete %s/%s: %w", key, endpoint, err)
	}
	return nil
}

// GetOrSet returns the value the fleet has settled for key and id, and
// true, or stores candidate for ttl and returns it, and false: the first
// replica to ask settles it for every replica, until ttl runs out, by
// one script on one Redis (linearizable on a standalone Redis, or on a
// primary whose replicas are not read). It refuses an empty or overlong
// key or id, a candidate over MaxValueBytes, a ttl under a millisecond,
// and a stored value over MaxValueBytes.
func (s *Syncer) GetOrSet(ctx context.Context, key, id string, candidate []byte, ttl time.Duration) (actual []byte, existed bool, err error) {
	if err := checkSyncKey("key", key); err != nil {
		return nil, false, err
	}
	if err := checkSyncKey("id", id); err != nil {
		return nil, false, err
	}
	if len(candidate) > s.maxValue {
		return nil, false, fmt.Errorf("redisfleet: candidate of %d bytes, over %d", len(candidate), s.maxValue)
	}
	if ttl < time.Millisecond {
		return nil, false, fmt.Errorf("redisfleet: ttl %v, want at least 1ms", ttl)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	reply, err := syncOnceScript.Run(ctx, s.client, []string{s.onceKey(key, id)},
		candidate, ttl.Milliseconds(), s.maxValue).Slice()
	if err != nil {
		return nil, false, fmt.Errorf("redisfleet: get-or-set %s/%s: %w", key, id, err)
	}
	if len(reply) != 2 {
		return nil, false, fmt.Errorf("redisfleet: get-or-set %s/%s: a reply of %d elements, want 2", key, id, len(reply))
	}
	flag, _ := reply[0].(int64)
	v, ok := reply[1].(string)
	if !ok {
		return nil, false, fmt.Errorf("redisfleet: get-or-set %s/%s: the stored value is over %d bytes", key, id, s.maxValue)
	}
	return []byte(v), flag == 1, nil
}
