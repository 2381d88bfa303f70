package gate

import "time"

// share returns replica's share of room among replicas, for the metrics
// of endpoint name read at readAt: room/replicas, plus one for the
// replicas that the rotation picks for the remainder. The shares of all
// replicas sum to room.
func share(room, replicas, replica int, name string, readAt time.Time) int64 {
	if replicas == 1 {
		return int64(room)
	}
	q, r := room/replicas, room%replicas
	rot := int(mix(fnv(name)^uint64(readAt.UnixNano())) % uint64(replicas))
	if (replica-rot+replicas)%replicas < r {
		q++
	}
	return int64(q)
}

// fnv is the 64-bit FNV-1a hash of s.
func fnv(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix is splitmix64's finalizer: nearby inputs give unrelated outputs, so
// ReadAts a scrape interval apart rotate the remainder.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
