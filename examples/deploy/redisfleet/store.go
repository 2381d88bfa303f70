// Package redisfleet is a [fleet.Store] on Redis: the replicas of
// sluice-gateway, each in its own process, publish their flow-control
// state to one Redis and read the fleet's back.
//
// # Layout
//
// Under a key prefix P (Options.Prefix, "sluice:fleet" by default; give
// each fleet sharing a Redis its own), the store keeps
//   - P:r:ID, one string per replica: its state, encoded as JSON, set with
//     PX so that Redis itself expires it when the lease runs out;
//   - P:idx, a sorted set of the replicas' IDs scored by when their lease
//     ends, in milliseconds on Redis's clock, so that Read finds the live
//     replicas without scanning the keyspace. Its own TTL is kept at least
//     the longest lease published, so a fleet that goes away leaves
//     nothing behind.
//
// A [Syncer] on the same prefix adds, for plugin state keyed by a key and
// an endpoint (the shape of llm-d-router's CrossReplicaSyncer seam),
//   - P:s:N:KEY:ENDPOINT, a hash of each replica's value with its lease
//     end (N is KEY's length, so no two pairs share a hash);
//   - P:g:N:KEY:ID, a value settled once for the fleet (GetOrSet).
//
// Publish and Read are each one Lua script, so one round trip. Leases are
// timed on Redis's clock alone (PX, and the index scored by Redis's TIME):
// clock skew between replicas moves no lease. A replica killed without
// warning disappears from Read within its lease; a Redis that restarts
// empty, or a FLUSHALL, is refilled by the replicas' next publishes.
//
// # What is trusted
//
// Nothing read back. The Read script returns at most MaxReplicas entries
// (more live ones is an error, as [fleet.Store] asks) and drops, before
// they leave Redis, an ID longer than [fleet.MaxIDLength] and a value
// longer than Options.MaxValueBytes; the reader then decodes each value
// with encoding/json and keeps it only if [fleet.Replica.Check] accepts it
// and it names the ID it is stored under. Every entry dropped is counted
// ([Store.Dropped]); none panics the reader or grants room. A Read's reply
// is so bounded by MaxReplicas × (MaxIDLength + MaxValueBytes) bytes.
//
// # Time
//
// Every call runs under Options.Timeout (1 s by default) on top of its
// context. A client made by [NewClient] honours it on the socket as well;
// a client passed to [New] should be built with ContextTimeoutEnabled.
//
// The keys of one fleet are not declared to Redis Cluster's slot rules
// (the Read script reads keys it finds in the index): run the store on a
// standalone Redis or one primary with replicas.
package redisfleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegate/sluice/flowcontrol/fleet"
)

// Defaults for [Options].
const (
	// DefaultPrefix is the key prefix of a store whose Options.Prefix is
	// empty.
	DefaultPrefix = "sluice:fleet"
	// DefaultTimeout bounds one Publish or Read.
	DefaultTimeout = time.Second
	// DefaultMaxValueBytes is the longest stored value a Read accepts:
	// [fleet.MaxBands] bands take under 6 KiB as JSON, so 16 KiB holds
	// any state a replica can publish with room to spare.
	DefaultMaxValueBytes = 16 << 10
	// MaxPrefixLength is the longest key prefix.
	MaxPrefixLength = 256
)

// Options configures a [Store]. The zero value is usable.
type Options struct {
	// Prefix starts every key the store uses; DefaultPrefix if empty.
	// Fleets that share one Redis each take their own.
	Prefix string
	// Timeout bounds each call; DefaultTimeout if zero.
	Timeout time.Duration
	// MaxValueBytes is the longest value a Read accepts;
	// DefaultMaxValueBytes if zero. A longer one is dropped in Redis,
	// never sent.
	MaxValueBytes int
}

// Store is a [fleet.Store] on Redis. It is safe for concurrent use.
type Store struct {
	client    redis.Scripter
	index     string
	keyPrefix string
	timeout   time.Duration
	maxValue  int

	dropped  atomic.Int64
	lastDrop atomic.Pointer[string]
}

var _ fleet.Store = (*Store)(nil)

// New returns a store that keeps its keys in client's Redis. It checks
// opts and names the field it refuses; it does not contact Redis.
func New(client redis.Scripter, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisfleet: nil client")
	}
	if err := shared("Options", &opts.Prefix, &opts.Timeout, &opts.MaxValueBytes); err != nil {
		return nil, err
	}
	return &Store{
		client:    client,
		index:     opts.Prefix + ":idx",
		keyPrefix: opts.Prefix + ":r:",
		timeout:   opts.Timeout,
		maxValue:  opts.MaxValueBytes,
	}, nil
}

// shared checks the options a Store and a Syncer both take, naming the
// field of kind (the options' type) it refuses, and fills in their
// defaults.
func shared(kind string, prefix *string, timeout *time.Duration, maxValue *int) error {
	if *prefix == "" {
		*prefix = DefaultPrefix
	}
	if len(*prefix) > MaxPrefixLength || strings.ContainsAny(*prefix, " \t\r\n") {
		return fmt.Errorf("redisfleet: %s.Prefix %q: want at most %d bytes and no white space", kind, *prefix, MaxPrefixLength)
	}
	switch {
	case *timeout < 0:
		return fmt.Errorf("redisfleet: %s.Timeout %v: want a positive duration", kind, *timeout)
	case *timeout == 0:
		*timeout = DefaultTimeout
	}
	switch {
	case *maxValue < 0 || *maxValue > 1<<20:
		return fmt.Errorf("redisfleet: %s.MaxValueBytes %d: want 1 to %d", kind, *maxValue, 1<<20)
	case *maxValue == 0:
		*maxValue = DefaultMaxValueBytes
	}
	return nil
}

// NewClient returns a go-redis client for one Redis at addr (host:port)
// whose every dial, read and write is bounded by timeout and which honours
// its callers' deadlines, as a Store wants: a Redis that stops answering
// costs a replica at most timeout per call before it falls back. password
// may be empty.
func NewClient(addr, password string, timeout time.Duration) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                  addr,
		Password:              password,
		DialTimeout:           timeout,
		ReadTimeout:           timeout,
		WriteTimeout:          timeout,
		ContextTimeoutEnabled: true,
		// One retry on a fresh connection: a Redis that restarted leaves
		// the pool's connections broken, and the first call after finds
		// out. The call's timeout bounds both tries.
		MaxRetries: 1,
		// One dial per call: a Redis that is down fails the call at
		// once, and the view falls back, rather than redialling within
		// it. (After as many failed dials as the pool holds, go-redis
		// redials in the background once a second, so a Redis that
		// returns is used again within about a second.)
		DialerRetries:   1,
		PoolSize:        4,
		DisableIdentity: true,
	})
}

// publishScript stores one replica's state and indexes it.
//
// KEYS[1] the index, KEYS[2] the replica's key; ARGV[1] its ID, ARGV[2]
// the value, ARGV[3] the lease in ms, ARGV[4] the most replicas kept.
var publishScript = redis.NewScript(`
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
  return redis.error_reply('FLEETFULL the fleet index holds the most replicas it keeps')
end
redis.call('SET', KEYS[2], ARGV[2], 'PX', lease)
redis.call('ZADD', KEYS[1], now + lease, ARGV[1])
if redis.call('PTTL', KEYS[1]) < lease then
  redis.call('PEXPIRE', KEYS[1], lease)
end
return 1
`)

// Codes the read script returns in place of a value it withholds.
const (
	codeMissing  = 0 // the key is gone (expired or deleted): not live
	codeTooLong  = 1 // the value is longer than the limit
	codeNotValue = 2 // the key holds something other than a string
	codeLongID   = 3 // the index member is longer than an ID may be
)

// readScript returns the live replicas' IDs and values, at most ARGV[2],
// withholding what is too long.
//
// KEYS[1] the index; ARGV[1] the replicas' key prefix, ARGV[2] the most
// replicas, ARGV[3] the longest value, ARGV[4] the longest ID.
var readScript = redis.NewScript(`
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local most = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local ids = redis.call('ZRANGE', KEYS[1], 0, most)
if #ids > most then
  return redis.error_reply('FLEETFULL the fleet index holds more replicas than a read returns')
end
local out = {}
for _, id in ipairs(ids) do
  if string.len(id) > tonumber(ARGV[4]) then
    out[#out + 1] = ''
    out[#out + 1] = 3
  else
    local v = redis.pcall('GET', ARGV[1] .. id)
    out[#out + 1] = id
    if type(v) == 'string' then
      if string.len(v) > tonumber(ARGV[3]) then
        out[#out + 1] = 1
      else
        out[#out + 1] = v
      end
    elseif v == false then
      redis.call('ZREM', KEYS[1], id)
      out[#out + 1] = 0
    else
      out[#out + 1] = 2
    end
  end
end
return out
`)

// Publish stores r for lease, timed on Redis's clock. It refuses a state
// [fleet.Replica.Check] refuses, a lease under a millisecond, and a new
// replica when the fleet already holds [fleet.MaxReplicas].
func (s *Store) Publish(ctx context.Context, r fleet.Replica, lease time.Duration) error {
	if err := r.Check(); err != nil {
		return err
	}
	if lease < time.Millisecond {
		return fmt.Errorf("redisfleet: lease %v, want at least 1ms", lease)
	}
	value, err := encode(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err = publishScript.Run(ctx, s.client,
		[]string{s.index, s.keyPrefix + r.ID},
		r.ID, value, lease.Milliseconds(), fleet.MaxReplicas).Err()
	if err != nil {
		return fmt.Errorf("redisfleet: publish %s: %w", r.ID, err)
	}
	return nil
}

// Read returns every live replica's state, sorted by ID, dropping and
// counting each entry that is too long, not JSON of a replica's state,
// refused by [fleet.Replica.Check], or stored under another ID than the
// one it names.
func (s *Store) Read(ctx context.Context) ([]fleet.Replica, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	reply, err := readScript.Run(ctx, s.client, []string{s.index},
		s.keyPrefix, fleet.MaxReplicas, s.maxValue, fleet.MaxIDLength).Slice()
	if err != nil {
		return nil, fmt.Errorf("redisfleet: read: %w", err)
	}
	if len(reply)%2 != 0 || len(reply) > 2*fleet.MaxReplicas {
		return nil, fmt.Errorf("redisfleet: read: a reply of %d elements, want pairs of at most %d", len(reply), fleet.MaxReplicas)
	}
	out := make([]fleet.Replica, 0, len(reply)/2)
	for i := 0; i < len(reply); i += 2 {
		id, _ := reply[i].(string)
		switch v := reply[i+1].(type) {
		case string:
			r, err := s.decodeEntry(id, v)
			if err != nil {
				s.drop(err)
				continue
			}
			out = append(out, r)
		case int64:
			if v != codeMissing {
				s.drop(withheld(id, v, s.maxValue))
			}
		default:
			s.drop(fmt.Errorf("redisfleet: replica %.*q: a reply of type %T", fleet.MaxIDLength, id, v))
		}
	}
	slices.SortFunc(out, func(a, b fleet.Replica) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func (s *Store) decodeEntry(id, value string) (fleet.Replica, error) {
	if len(value) > s.maxValue {
		return fleet.Replica{}, fmt.Errorf("redisfleet: replica %q: value of %d bytes, over %d", id, len(value), s.maxValue)
	}
	r, err := Decode([]byte(value))
	if err != nil {
		return fleet.Replica{}, fmt.Errorf("redisfleet: replica %q: %w", id, err)
	}
	if r.ID != id {
		return fleet.Replica{}, fmt.Errorf("redisfleet: replica %q: value names replica %q", id, r.ID)
	}
	return r, nil
}

func withheld(id string, code int64, maxValue int) error {
	switch code {
	case codeTooLong:
		return fmt.Errorf("redisfleet: replica %q: value over %d bytes", id, maxValue)
	case codeNotValue:
		return fmt.Errorf("redisfleet: replica %q: its key holds no string", id)
	case codeLongID:
		return fmt.Errorf("redisfleet: an indexed ID over %d bytes", fleet.MaxIDLength)
	}
	return fmt.Errorf("redisfleet: replica %q: unknown code %d", id, code)
}

func (s *Store) drop(err error) {
	s.dropped.Add(1)
	msg := err.Error()
	s.lastDrop.Store(&msg)
}

// Dropped returns how many entries Reads have dropped as unusable since
// the store was made, and why the latest was (empty if none was).
func (s *Store) Dropped() (n int64, last string) {
	if p := s.lastDrop.Load(); p != nil {
		last = *p
	}
	return s.dropped.Load(), last
}

// wireVersion is the encoding's version; a value of another is refused.
const wireVersion = 1

// wire is a replica's state as stored.
type wire struct {
	V     int        `json:"v"`
	ID    string     `json:"id"`
	At    int64      `json:"at"` // Unix nanoseconds on the replica's clock
	Bands []wireBand `json:"bands"`
}

type wireBand struct {
	Priority int     `json:"p"`
	Waiting  int64   `json:"w"`
	InFlight int64   `json:"f"`
	Demand   float64 `json:"d"`
}

func encode(r fleet.Replica) (string, error) {
	w := wire{V: wireVersion, ID: r.ID, At: r.At.UnixNano(), Bands: make([]wireBand, len(r.Bands))}
	for i, b := range r.Bands {
		w.Bands[i] = wireBand(b)
	}
	b, err := json.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("redisfleet: encode %s: %w", r.ID, err)
	}
	return string(b), nil
}

// Decode parses one stored value, as Read does, and returns the state only
// if [fleet.Replica.Check] accepts it. It never panics, whatever data
// holds; its work is linear in len(data).
func Decode(data []byte) (fleet.Replica, error) {
	var w wire
	if err := json.Unmarshal(data, &w); err != nil {
		return fleet.Replica{}, fmt.Errorf("not a stored state: %w", err)
	}
	if w.V != wireVersion {
		return fleet.Replica{}, fmt.Errorf("encoding version %d, want %d", w.V, wireVersion)
	}
	if len(w.Bands) > fleet.MaxBands {
		return fleet.Replica{}, fmt.Errorf("%w: Bands: %d bands, want at most %d", fleet.ErrInvalid, len(w.Bands), fleet.MaxBands)
	}
	r := fleet.Replica{ID: w.ID, Bands: make([]fleet.Band, len(w.Bands))}
	if w.At != 0 {
		r.At = time.Unix(0, w.At)
	}
	for i, b := range w.Bands {
		r.Bands[i] = fleet.Band(b)
	}
	if err := r.Check(); err != nil {
		return fleet.Replica{}, err
	}
	return r, nil
}
