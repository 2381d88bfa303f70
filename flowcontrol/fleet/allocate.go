package fleet

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// allocation is the division of the fleet's budget one round computed.
type allocation struct {
	share int64 // this replica's in-flight budget
	live  int
	bands []BandShare
}

// allocate divides budget among fleet, whose first entry is this replica
// (its live state) and the rest the others as last read, each accepted by
// Replica.Check and with a distinct ID. The rule, written out in
// [View.Gate]'s doc:
//
//  1. In strict priority, highest band first, each band p is granted
//     A_p = min(D_p, what the bands above left of budget), where D_p is the
//     fleet's demand in the band, Σ_r (waiting_rp + inFlight_rp).
//  2. Replica r's part of A_p is A_p × (waiting_rp + inFlight_rp) / D_p.
//  3. What no band claims is divided in proportion to each replica's
//     smoothed arrival rate (Σ_p Demand_rp), or evenly when no replica has
//     any, so that a replica with nothing waiting can still start an
//     arrival at once.
//  4. Each replica's sum is rounded by largest remainder (ties by ID), so
//     that the integer shares sum to budget exactly and every replica
//     reading the same states computes the same shares.
//  5. This replica's share is capped at budget − Σ_{j≠self} inFlight_j:
//     it never counts on slots another replica is known to hold.
//
// And each band p with a fleet-wide request capacity Q_p in capacities:
// this replica's part is what it holds waiting plus its part of the room,
// Q_p − Σ_r waiting_rp (at least 0), by the band's arrival rate on each
// replica (evenly when none has any), by largest remainder.
func allocate(budget int64, capacities map[int]int64, fleet []Replica) allocation {
	self := fleet[0].ID
	fleet = slices.Clone(fleet)
	slices.SortFunc(fleet, func(a, b Replica) int { return strings.Compare(a.ID, b.ID) })
	me := slices.IndexFunc(fleet, func(r Replica) bool { return r.ID == self })

	// The bands of the fleet, highest first.
	var prios []int
	for _, r := range fleet {
		for _, b := range r.Bands {
			prios = append(prios, b.Priority)
		}
	}
	slices.SortFunc(prios, func(a, b int) int { return cmp.Compare(b, a) })
	prios = slices.Compact(prios)
	index := func(p int) int {
		i, _ := slices.BinarySearchFunc(prios, p, func(a, b int) int { return cmp.Compare(b, a) })
		return i
	}

	bands := make([]BandShare, len(prios))
	demand := make([]int64, len(prios))
	for i, p := range prios {
		bands[i].Priority = p
	}
	var othersInFlight int64
	for i, r := range fleet {
		for _, b := range r.Bands {
			k := index(b.Priority)
			bands[k].Waiting += b.Waiting
			bands[k].InFlight += b.InFlight
			demand[k] += b.Waiting + b.InFlight
			if i != me {
				bands[k].OtherWaiting += b.Waiting
				othersInFlight += b.InFlight
			}
		}
	}

	left := budget
	for k := range bands {
		bands[k].Granted = min(demand[k], left)
		left -= bands[k].Granted
	}

	// Each replica's real-valued part, then the leftover.
	parts := make([]float64, len(fleet))
	var rates float64
	rate := make([]float64, len(fleet))
	for i, r := range fleet {
		for _, b := range r.Bands {
			k := index(b.Priority)
			if d := b.Waiting + b.InFlight; d > 0 {
				x := float64(bands[k].Granted) * float64(d) / float64(demand[k])
				parts[i] += x
				if i == me {
					bands[k].Share = x
				}
			}
			rate[i] += b.Demand
		}
		rates += rate[i]
	}
	for i := range parts {
		if rates > 0 {
			parts[i] += float64(left) * rate[i] / rates
		} else {
			parts[i] += float64(left) / float64(len(fleet))
		}
	}

	shares := roundShares(budget, parts)
	share := max(0, min(shares[me], budget-othersInFlight))

	for k := range bands {
		bands[k].Capacity = -1
		q, ok := capacities[bands[k].Priority]
		if !ok {
			continue
		}
		room := max(0, q-bands[k].Waiting)
		var mine float64
		var waiting int64
		var sum float64
		weights := make([]float64, len(fleet))
		for i, r := range fleet {
			for _, b := range r.Bands {
				if b.Priority == bands[k].Priority {
					weights[i] = b.Demand
					if i == me {
						waiting = b.Waiting
					}
				}
			}
			sum += weights[i]
		}
		for i := range weights {
			if sum > 0 {
				weights[i] = float64(room) * weights[i] / sum
			} else {
				weights[i] = float64(room) / float64(len(fleet))
			}
		}
		mine = float64(roundShares(room, weights)[me])
		bands[k].Capacity = min(waiting+int64(mine), MaxCount)
	}
	return allocation{share: share, live: len(fleet), bands: bands}
}

// roundShares rounds parts, which sum to total, to integers that sum to
// total: each its floor, then one more to the largest fractions, ties in
// index order (the replicas' ID order).
func roundShares(total int64, parts []float64) []int64 {
	shares := make([]int64, len(parts))
	order := make([]int, len(parts))
	var given int64
	for i, x := range parts {
		shares[i] = min(int64(math.Floor(x)), total)
		given += shares[i]
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		fa, fb := parts[a]-math.Floor(parts[a]), parts[b]-math.Floor(parts[b])
		return cmp.Compare(fb, fa)
	})
	for j := 0; given < total && j < len(order); j++ {
		shares[order[j]]++
		given++
	}
	return shares
}
